"""gpu-paged: the Pallas GPU (Triton) paged attention (block tables, lengths, GQA, int8 pages)."""
