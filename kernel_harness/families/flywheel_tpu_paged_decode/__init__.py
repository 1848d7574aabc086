"""flywheel-tpu's paged single-token decode (``flash_attn_with_kvcache``) on the paged op."""
