"""The attention op: what splash, flash, sdpa, gpu-mha and hstu share.

- :mod:`.vocabulary`: the canonical spelling of a case's shape (``q_heads``,
  ``kv_heads``, ``q_len``, ``kv_len``, ``head_dim``), the two array layouts and the
  axis roles of q/k/v/do in each.
- :mod:`.reference`: the independent dense reference (visibility built from the case
  description, softmax attention with exact zero weight on masked keys) and its
  low-precision twin, the yardstick of the calibrated judge.
- :mod:`.tolerance`: the fixed float32/bfloat16 tables with their measured reasons and
  the calibrated bound.
- :mod:`.events`: the coverage labels every attention kernel reports the same way.
- :mod:`.metamorphic`: builders of the Metamorphic hooks (GQA as MHA, the contract's zero
  cotangent on rows without keys, lane-multiple block divisors).
"""
