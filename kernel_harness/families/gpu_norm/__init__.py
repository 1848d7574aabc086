"""gpu-norm: the Pallas GPU (Triton) layer_norm and rms_norm kernels with their backward."""
