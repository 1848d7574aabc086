"""flywheel-tpu's flash attention (``flash_attn_func``) on the attention problem."""
