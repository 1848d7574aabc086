"""An implementation learns its backend one way, whatever its family's call looks like
(issue 56): ``kernel_harness.current_backend()`` while the harness runs, traces or lowers it.
sdpa's call has no ``interpret=``: an ``--impl`` wrapping a Pallas kernel asks it there."""

from __future__ import annotations

import jax
import pytest

import kernel_harness
from kernel_harness.checks.lowering import lower_case
from kernel_harness.core.backends import resolve_backend, running_on
from kernel_harness.families.sdpa.cases import SdpaCase
from kernel_harness.records.registry import get_family
from kernel_harness.run.runner import check_case
from tests.helpers.accepted_source import project_accepted_source
from tests.helpers.backend_recorder import SEEN, asks_its_backend

CASE = SdpaCase(dtype="float32", seed=0, batch=1, q_heads=2, kv_heads=2, q_len=16, kv_len=16,
                head_dim=32)


def test_outside_a_harness_run_it_says_so() -> None:
    with pytest.raises(RuntimeError, match="outside a harness run"):
        kernel_harness.current_backend()


def test_a_run_and_a_tpu_lowering_each_tell_the_implementation_their_backend() -> None:
    SEEN.clear()
    family = get_family("sdpa")
    with project_accepted_source():  # SEEN.append is a reviewed line (pyproject.toml)
        assert check_case(family, CASE, resolve_backend("interpret"), asks_its_backend).passed
    assert SEEN and set(SEEN) == {"interpret"}
    SEEN.clear()
    lower_case(family, CASE, asks_its_backend)  # traced for a TPU: asked "tpu", not reused
    assert SEEN and set(SEEN) == {"tpu"}


def test_nested_blocks_restore_the_outer_backend() -> None:
    outer, inner = resolve_backend("interpret"), resolve_backend("tpu-interpret")
    with running_on(outer):
        with running_on(inner):
            assert kernel_harness.current_backend() is inner
        assert kernel_harness.current_backend() is outer
    assert jax.default_backend() == "cpu"
