"""The pointwise-attention op (HSTU): ``(mask * silu(scale q k^T) / q_len) v``, no softmax.

- :mod:`.reference`: the independent plain-jnp reference over a dense visibility built by
  the attention op's one mask builder (:func:`kernel_harness.ops.attention.reference.
  visibility`).
- :mod:`.cases`: the op's case vocabulary (shapes, the mask as ``causal``/``full`` or a
  described numpy mask, window, segment runs, and the HSTU kernel's block sizes, as the
  MoE and quantized matmul ops carry their kernels' tiling), its strategy and seed cases.
- :mod:`.masks`: the dense mask a case describes, for the reference and the hooks.
"""
