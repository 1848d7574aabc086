"""Mutant catalog for gpu-softmax: realistic bugs planted in the installed Pallas GPU
``softmax`` source (``kernel-harness mutate gpu-softmax`` must kill every one): the max
subtraction, the padding value of a partial block, the lane mask,
the block size, the stored precision."""

from __future__ import annotations

from kernel_harness.records.mutant import CI, Mutant, edits_of

_sm = edits_of("jax.experimental.pallas.ops.gpu.softmax")

MUTANTS: list[Mutant] = [
    _sm("no-max-subtraction", "exp(x) without subtracting the row max (overflows for logits > 88)",
        "numerator = jnp.exp((row - row_max).astype(jnp.float32))",
        "numerator = jnp.exp(row.astype(jnp.float32))", tags=CI),
    _sm("subtracts-first-logit", "stabilizes with the row's first logit instead of its max",
        "row_max = jnp.max(row, axis=0)", "row_max = row[0]"),
    _sm("padding-zero-not-neg-inf",
        "lanes past n load 0.0 instead of -inf (they enter the max and the sum)",
        'other=-float("inf")', "other=0.0", tags=CI),
    # The lane index is spelled differently in jax 0.10.2 and 0.12; the comparison is the
    # same text in both.
    _sm("lane-mask-off-by-one", "the lane mask keeps one lane past n", " < row_len", " <= row_len"),
    _sm("block-one-short", "the block is sized from n - 1, so a row one past a power of two "
        "loses its last lane", "block_row = pl.next_power_of_2(row_len)",
        "block_row = pl.next_power_of_2(row_len - 1)"),
    _sm("stores-bf16", "the probabilities are rounded to bfloat16 whatever the input dtype",
        "(numerator / denominator).astype(probs_ref.dtype)",
        "(numerator / denominator).astype(jnp.bfloat16).astype(probs_ref.dtype)"),
]
