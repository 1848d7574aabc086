"""A toy catalog whose mutants are planted in another implementation than the family's
kernel (its ``IMPL``), as tpu-all-gather's are planted in the corrected ring."""

from kernel_harness.records.mutant import Mutant

IMPL = "tests.helpers.toy_planted_impl:softplus_copy"

MUTANTS = [
    Mutant(name="copy-shifted", description="softplus of x + 0.01 in the copy",
           module="tests.helpers.toy_planted_impl", old="return jnp.logaddexp(x, 0.0)",
           new="return jnp.logaddexp(x + 0.01, 0.0)", tags=("ci",)),
]
