"""A mutant catalog for the toy family (tests of ``kernel_harness.regression.mutate``)."""

from kernel_harness.records.mutant import Mutant

MODULE = "tests.helpers.toy_family"

MUTANTS = [
    Mutant(
        name="shifted",
        description="softplus of x + 0.01 instead of x",
        module=MODULE,
        old="return jnp.logaddexp(x, 0.0)",
        new="return jnp.logaddexp(x + 0.01, 0.0)",
        tags=("ci",),
    ),
    Mutant(
        name="harmless",
        description="an equivalent rewrite (must survive: the harness is not paranoid)",
        module=MODULE,
        old="return jnp.logaddexp(x, 0.0)",
        new="return jnp.logaddexp(0.0, x)",
    ),
    Mutant(
        name="stale",
        description="text that is not in the source",
        module=MODULE,
        old="return jnp.softplus(x)",
        new="return x",
    ),
]
