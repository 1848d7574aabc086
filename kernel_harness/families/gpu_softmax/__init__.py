"""gpu-softmax: the Pallas GPU (Triton) softmax kernel over the last axis."""
