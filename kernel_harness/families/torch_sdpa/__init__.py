"""torch's scaled_dot_product_attention (or a torch wrapper of its signature), run under JAX
through :mod:`kernel_harness.core.torch_bridge` and judged against the attention reference."""
