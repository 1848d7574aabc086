"""TPU flash attention family (``jax.experimental.pallas.ops.tpu.flash_attention``)."""
