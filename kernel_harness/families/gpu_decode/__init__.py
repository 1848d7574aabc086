"""gpu-decode: the Pallas GPU (Triton) decode attention ``gqa`` and ``mqa`` (split-k, start/end)."""
