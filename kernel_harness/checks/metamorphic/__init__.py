"""Metamorphic properties: relations between kernel runs that need no reference
(:mod:`.relations`), and the machinery that runs them (:mod:`.machinery`)."""

from kernel_harness.checks.metamorphic.arrays import problem_sizes, roles_of
from kernel_harness.checks.metamorphic.machinery import (
    MIN_EXAMPLES,
    TPU_INTERPRETER,
    Check,
    MetamorphicFailure,
    Spec,
    build,
    example_cap,
)
from kernel_harness.checks.metamorphic.relations import PROPERTIES, SPECS

__all__ = [
    "MIN_EXAMPLES",
    "PROPERTIES",
    "SPECS",
    "TPU_INTERPRETER",
    "Check",
    "MetamorphicFailure",
    "Spec",
    "build",
    "example_cap",
    "problem_sizes",
    "roles_of",
]
