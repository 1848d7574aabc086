"""XLA scaled dot-product attention family (``jax.nn.dot_product_attention``)."""
