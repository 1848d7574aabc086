"""``schedule-invariance`` (issue 38): the same case under a pinned TPU interpreter schedule,
then with only the DMA completion order changed, then with only the parallel grid order
changed; any bitwise difference is a failure that names the two schedules and which
dimension changed. (That the schedule reaches a kernel: tests/core/test_backend_schedule.py.)"""

from __future__ import annotations

import hypothesis
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase

from kernel_harness.checks.metamorphic import relations
from kernel_harness.checks.metamorphic.machinery import Check
from kernel_harness.checks.properties import PROPERTIES, Observer, build_property
from kernel_harness.core.backends import resolve_backend
from kernel_harness.core.errors import PropertyNotApplicable
from tests.helpers import planted_kernels as pk

TPU_INTERPRET = resolve_backend("tpu-interpret")


class _Fixed:
    """Stands in for the example's ``data``: the two grid-order seeds, fixed."""

    def __init__(self, *values: int):
        self._values = iter(values)

    def draw(self, strategy, label=None):
        return next(self._values)


def _check(outputs_of) -> tuple[Check, list[tuple]]:
    ran: list[tuple] = []
    check = Check(family=pk.TOY_ATTENTION, prop="schedule-invariance", case=None,
                  backend=TPU_INTERPRET, impl=None, impl_spec=None, inputs={})

    def run(case=None, inputs=None, backend=None):
        ran.append(backend.schedule)
        return {"out": outputs_of(dict(backend.schedule))}

    check.run = run
    return check, ran


def _body(check: Check) -> None:
    relations._schedule_invariance(check, _Fixed(5, 4))  # seeds 5 and 5 + 4


def test_a_kernel_that_depends_on_the_dma_order_fails_naming_it():
    check, ran = _check(lambda s: np.full((2, 3, 4), s["dma_execution_mode"] == "eager", float))
    _body(check)
    (problem,) = check.problems
    assert "dma=on_wait grid-seed=5 -> dma=eager grid-seed=5 (only the DMA order)" in problem
    assert "changed 24 element(s) (bitwise)" in problem
    assert ran == [(("dma_execution_mode", "on_wait"), ("random_seed", 5)),
                   (("dma_execution_mode", "eager"), ("random_seed", 5)),
                   (("dma_execution_mode", "on_wait"), ("random_seed", 9))]


def test_a_kernel_that_depends_on_the_grid_order_fails_naming_it():
    def outputs(s):
        out = np.zeros((2, 3, 4))
        out[1, 2, 3] = s["random_seed"]
        return out

    check, _ = _check(outputs)
    _body(check)
    (problem,) = check.problems
    assert "dma=on_wait grid-seed=5 -> dma=on_wait grid-seed=9 (only the grid order)" in problem
    assert "changed 1 element(s)" in problem and ": 5 -> 9" in problem


def test_nan_where_every_schedule_has_nan_is_the_same_output():
    check, ran = _check(lambda s: np.full((2, 3, 4), np.nan))
    _body(check)
    assert check.problems == [] and len(ran) == 3


def test_it_runs_on_the_tpu_interpreter_only():
    with pytest.raises(PropertyNotApplicable, match="tpu-interpret only"):
        build_property("schedule-invariance", pk.TOY_ATTENTION,
                       backend=resolve_backend("interpret"))


def test_a_pallas_kernel_that_does_not_depend_on_the_schedule_passes():
    observer = Observer()
    prop = PROPERTIES["schedule-invariance"](pk.TOY_ATTENTION, backend=TPU_INTERPRET,
                                             observer=observer)
    hypothesis.settings(max_examples=2, deadline=None, database=None, derandomize=True,
                        phases=[Phase.explicit, Phase.generate],
                        suppress_health_check=list(HealthCheck))(prop)()
    assert observer.examples >= 1 and observer.failed == 0
