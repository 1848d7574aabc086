"""The splash attention family (``jax.experimental.pallas.ops.tpu.splash_attention``)."""
