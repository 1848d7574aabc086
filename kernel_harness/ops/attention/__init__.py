"""The attention op: what every softmax attention kernel shares (splash, flash, sdpa,
gpu-mha, gpu-decode, torch-sdpa, and through :mod:`kernel_harness.ops.paged_attention` the
paged and ragged paged kernels).

- :mod:`.vocabulary`: the canonical spelling of a case's shape (``q_heads``,
  ``kv_heads``, ``q_len``, ``kv_len``, ``head_dim``), the two array layouts and the
  axis roles of q/k/v/do in each.
- :mod:`.reference`: the one dense-mask builder (:func:`~.reference.visibility`, from the
  case description), the one softmax (:func:`~.reference.attend`: exact zero weight on
  masked keys, soft cap, sinks, where the denominator divides).
- :mod:`.program`: every attention family's reference: a family's ``Definition`` (its
  declared options) and ``AttentionCall`` (its case in the op's arrays) run by one program
  (forward, vjp, lse, summed-term magnitudes) and its low-precision twin, the yardstick
  of the calibrated judge.
- :mod:`.tolerance`: the fixed float32/bfloat16 tables with their measured reasons and
  the calibrated bound.
- :mod:`.events`: the coverage labels every attention kernel reports the same way.
- :mod:`.metamorphic`: builders of the Metamorphic hooks (GQA as MHA, the contract's zero
  cotangent on rows without keys, lane-multiple block divisors).
"""
