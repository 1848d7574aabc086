"""The pointwise-attention op (HSTU): ``(mask * silu(scale q k^T) / q_len) v``, no softmax.

- :mod:`.reference`: the independent plain-jnp reference over a dense visibility built by
  the attention op's one mask builder (:func:`kernel_harness.ops.attention.reference.
  visibility`).
"""
