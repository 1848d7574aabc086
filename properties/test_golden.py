"""Every family's stored golden cases still hold: the kernel (or ``--kh-impl``) against the
stored reference outputs, and the fresh reference against the stored one.

A missing golden fails; ``--force-regen`` rewrites the goldens first (the only way this
test writes files). Goldens recorded on another jax version are compared against the
family tolerances (the outcome notes the versions); ones recorded on another backend or
device are skipped with the reason.
"""

from __future__ import annotations

import warnings

import pytest

from kernel_harness.regression import golden
from kernel_harness.run import report


def test_golden_cases_hold(family, kh_backend, kh_impls, request):
    impl, _ = kh_impls.get(family.name, (None, None))
    if request.config.getoption("--force-regen"):
        recorded = golden.run_family(family, kh_backend, mode="record", impl=impl, force=True)
        table = report.format_table(golden.SUMMARY_HEADERS, golden.summary_rows(recorded))
        assert all(o.ok for o in recorded), f"regeneration failed:\n{table}"
        warnings.warn(f"--force-regen rewrote {len(recorded)} golden case(s) of {family.name}",
                      stacklevel=1)
    outcomes = golden.run_family(family, kh_backend, mode="check", impl=impl)
    table = report.format_table(golden.SUMMARY_HEADERS, golden.summary_rows(outcomes))
    assert all(o.ok for o in outcomes), f"golden check of {family.name} failed:\n{table}"
    skipped = [o for o in outcomes if o.status == "SKIP"]
    if skipped and len(skipped) == len(outcomes):
        pytest.skip(f"{family.name}: every golden skipped: {skipped[0].detail}")
    for o in skipped:
        warnings.warn(f"golden {family.name}/{o.name} skipped: {o.detail}", stacklevel=1)
