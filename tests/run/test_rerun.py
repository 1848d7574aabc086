"""A bitwise rerun inside matches-reference (issue 55, item 7): a kernel whose result
changes from run to run, by less than the tolerance, passed a ``--property
matches-reference`` run (only the ``deterministic`` property saw it); it fails now, named
"nondeterministic", and the pristine kernel passes. A family that declares its kernel
nondeterministic is not rerun."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import pytest

from kernel_harness import get_family, testing
from kernel_harness.core.backends import resolve_backend
from kernel_harness.ops.softmax.cases import SoftmaxCase
from kernel_harness.run.rerun import changes
from kernel_harness.run.runner import check_case
from kernel_harness.testing import HarnessCheckFailed
from tests.helpers.accepted_source import project_accepted_source

PLANTED = "tests.helpers.nondeterministic_softmax:every_other_run"
CASE = SoftmaxCase(dtype="float32", seed=1, leading=(2,), n=100)


def test_a_kernel_that_differs_between_runs_fails_matches_reference_alone():
    with pytest.raises(HarnessCheckFailed, match="FAIL gpu-softmax nondeterministic \\(out\\) "
                       "float32 .*running the same compiled program again on the same "
                       "inputs changed out: [0-9]+ of [0-9]+ element\\(s\\) changed"):
        testing.check("gpu-softmax", impl=PLANTED, profile="dev",
                      properties=["matches-reference"], seed=1, shrink_budget="0")


def test_the_rerun_is_asked_for_and_a_declared_nondeterministic_kernel_is_not_rerun():
    from tests.helpers.nondeterministic_softmax import every_other_run

    family, backend = get_family("gpu-softmax"), resolve_backend("interpret")
    with project_accepted_source():  # its counter: accepted by the project's pyproject.toml
        assert check_case(family, CASE, backend, every_other_run).passed  # in tolerance
        assert not check_case(family, CASE, backend, every_other_run, rerun=True).passed
        declared = dataclasses.replace(family, nondeterministic="test: atomics")
        assert check_case(declared, CASE, backend, every_other_run, rerun=True).passed
    with project_accepted_source(none=True):  # unaccepted, its counter fails it
        assert check_case(declared, CASE, backend, every_other_run).suspicious_source
    assert check_case(family, CASE, backend, rerun=True).passed  # the real kernel


def test_changes_are_bitwise_and_nan_equals_nan():
    import numpy as np

    a = {"out": np.array([1.0, np.nan, 3.0], np.float32)}
    assert changes(a, {"out": a["out"].copy()}, ["out"]) == ()
    b = {"out": np.array([1.0, np.nan, np.nextafter(np.float32(3.0), np.float32(4.0))])}
    assert changes(a, b, ["out"]) == (
        "out: 1 of 3 element(s) changed (bitwise), largest |change| 2.38e-07",)
    # bfloat16 too (numpy's kind for it is "V": NaN used to count as changed there)
    bf = {"out": a["out"].astype(jnp.bfloat16)}
    assert changes(bf, {"out": bf["out"].copy()}, ["out"]) == ()
    assert changes(bf, {"out": b["out"].astype(jnp.bfloat16) * 2}, ["out"]) == (
        "out: 2 of 3 element(s) changed (bitwise), largest |change| 3",)
