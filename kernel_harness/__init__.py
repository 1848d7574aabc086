"""kernel-harness: a correctness harness for JAX Pallas attention kernels."""

from kernel_harness.core.backends import (
    BACKEND_NAMES,
    Backend,
    BackendUnavailable,
    availability,
    resolve_backend,
)
from kernel_harness.core.case import Case
from kernel_harness.core.compare import OutputStats, compare
from kernel_harness.core.tolerance import Tolerance, ToleranceTable, Verdict, judge
from kernel_harness.run.runner import CaseResult, check_case
from kernel_harness.spec.family import Family
from kernel_harness.spec.narrow import without
from kernel_harness.spec.registry import UnknownFamily, family_names, get_family

__all__ = [
    "BACKEND_NAMES",
    "Backend",
    "BackendUnavailable",
    "Case",
    "CaseResult",
    "Family",
    "OutputStats",
    "Tolerance",
    "ToleranceTable",
    "UnknownFamily",
    "Verdict",
    "availability",
    "check_case",
    "compare",
    "family_names",
    "get_family",
    "hstu_attention",
    "judge",
    "resolve_backend",
    "without",
]


def __getattr__(name: str):
    # Imported on first use: the kernel pulls in Pallas, and `kernel-harness mutate`
    # must be able to plant a bug in the hstu modules before anything imports them.
    if name == "hstu_attention":
        from kernel_harness.kernels.hstu.api import hstu_attention

        return hstu_attention
    raise AttributeError(f"module 'kernel_harness' has no attribute {name!r}")
