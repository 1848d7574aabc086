"""gpu-mha: the Pallas GPU (Triton) flash attention ``mha`` forward and fused backward."""
