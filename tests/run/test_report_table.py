"""The failure table's columns stay apart whatever a location's length (a worst slice of
four named axes ran into the next column)."""

from __future__ import annotations

import types

from kernel_harness.run.report import stats_table


def _verdict(slice_location: str) -> types.SimpleNamespace:
    stats = types.SimpleNamespace(
        output="out", max_abs_err=0.5, max_rel_err=0.6, mismatch_fraction=0.1, nan_actual=0,
        inf_actual=0, slice_rel_err=0.6, worst_slice_location=slice_location,
        worst_location="batch=0 token=3 value_head=0 dim=1", worst_actual=1.0,
        worst_expected=0.5)
    return types.SimpleNamespace(stats=stats, calibration=None, passed=False,
                                 tolerance=types.SimpleNamespace(max_rel_err=2e-5))


def test_a_long_worst_slice_does_not_run_into_the_next_column() -> None:
    long = "batch=0 token=3 value_head=0 chunk=12"
    table = stats_table([_verdict(long), _verdict("batch=1")])
    header, first, second = table.splitlines()
    assert f"{long} batch=0 token=3" in first
    start = header.index("worst (actual vs expected)")
    assert first[start:].startswith("batch=0 token=3") and second[start:].startswith("batch=0")


def test_a_partial_is_named_with_what_it_binds() -> None:
    import functools

    from kernel_harness.run.runner import impl_name

    def kernel(x, *, resets=True):
        return x

    assert impl_name(kernel).endswith(":test_a_partial_is_named_with_what_it_binds.<locals>."
                                      "kernel")
    planted = impl_name(functools.partial(kernel, resets=False))
    assert planted.startswith("functools.partial(") and planted.endswith(", resets=False)")
    assert impl_name(functools.partial(kernel), "mod:planted") == "mod:planted"
