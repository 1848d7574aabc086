"""Mutant catalog for gpu-softmax: realistic bugs planted in the installed Pallas GPU
``softmax`` source (``kernel-harness mutate gpu-softmax`` must kill every one): the max
subtraction, the padding value of a partial block, the lane mask,
the block size, the stored precision."""

from __future__ import annotations

from kernel_harness.spec.mutant import Mutant

SM = "jax.experimental.pallas.ops.gpu.softmax"

MUTANTS: list[Mutant] = [
    Mutant(name="no-max-subtraction",
           description="exp(x) without subtracting the row max (overflows for logits > 88)",
           module=SM, old="numerator = jnp.exp((row - row_max).astype(jnp.float32))",
           new="numerator = jnp.exp(row.astype(jnp.float32))", tags=("ci",)),
    Mutant(name="subtracts-first-logit",
           description="stabilizes with the row's first logit instead of its max",
           module=SM, old="row_max = jnp.max(row, axis=0)", new="row_max = row[0]"),
    Mutant(name="padding-zero-not-neg-inf",
           description="lanes past n load 0.0 instead of -inf (they enter the max and the "
           "sum)", module=SM, old='other=-float("inf")', new="other=0.0", tags=("ci",)),
    Mutant(name="lane-mask-off-by-one",
           description="the lane mask keeps one lane past n",
           # The lane index is spelled differently in jax 0.10.2 and 0.12; the comparison
           # is the same text in both.
           module=SM, old=" < row_len", new=" <= row_len"),
    Mutant(name="block-one-short",
           description="the block is sized from n - 1, so a row one past a power of two "
           "loses its last lane", module=SM,
           old="block_row = pl.next_power_of_2(row_len)",
           new="block_row = pl.next_power_of_2(row_len - 1)"),
    Mutant(name="stores-bf16",
           description="the probabilities are rounded to bfloat16 whatever the input dtype",
           module=SM, old="(numerator / denominator).astype(probs_ref.dtype)",
           new="(numerator / denominator).astype(jnp.bfloat16).astype(probs_ref.dtype)"),
]
