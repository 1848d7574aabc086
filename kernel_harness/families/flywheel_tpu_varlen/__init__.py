"""flywheel-tpu's varlen flash attention (``flash_attn_varlen_func``) on the attention problem."""
