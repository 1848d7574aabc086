"""TPU lowering on this CPU machine: a block shape interpret mode accepts but a TPU cannot
lower is caught with the reason; every registered family's strategy draws lowerable cases."""

from __future__ import annotations

import pytest

from kernel_harness.checks import lowering
from kernel_harness.core.backends import resolve_backend
from kernel_harness.core.errors import PropertyNotApplicable
from kernel_harness.records.registry import family_names, get_family
from kernel_harness.run.runner import check_case
from tests.helpers import planted_kernels as pk
from tests.helpers.per_push import per_push


def test_good_block_shape_lowers():
    case = pk.ToyAttentionCase(dtype="float32", seed=0, block_q=128, causal=True)
    result = lowering.lower_case(pk.TOY_ATTENTION, case)
    assert result.ok, result.error
    assert result.custom_calls == 1


def test_planted_block_shape_runs_interpreted_but_does_not_lower():
    case = pk.ToyAttentionCase(dtype="float32", seed=0, q_len=200, kv_len=200, block_q=100)
    # Interpret mode accepts it and computes the right answer...
    assert check_case(pk.TOY_ATTENTION, case, resolve_backend("interpret")).passed
    # ...but Mosaic's lowering rejects a 100-row block (not a multiple of 8).
    result = lowering.lower_case(pk.TOY_ATTENTION, case)
    assert not result.ok
    assert "divisible by 8 and 128" in result.error


def test_lowering_property_fails_on_a_strategy_drawing_bad_blocks():
    import dataclasses

    from hypothesis import HealthCheck, settings
    from hypothesis import strategies as st

    bad = dataclasses.replace(pk.TOY_ATTENTION, cases=lambda: st.just(pk.ToyAttentionCase(
        dtype="float32", seed=0, q_len=200, kv_len=200, block_q=100)))
    prop = lowering.lowers_for_tpu(bad, backend=resolve_backend("interpret"))
    with pytest.raises(lowering.LoweringFailure, match="does not lower for TPU"):
        settings(max_examples=1, database=None, suppress_health_check=list(HealthCheck))(prop)()


@pytest.mark.parametrize("name", per_push(family_names()))
def test_family_strategy_draws_lowerable_cases(name):
    family = get_family(name)
    try:
        results = lowering.lower_strategy(family, examples=4)
    except PropertyNotApplicable as e:
        pytest.skip(str(e))
    assert results
    bad = [r.describe() for r in results if not r.ok]
    assert not bad, "\n".join(bad)


def test_a_case_that_needs_a_tpu_device_kind_is_not_checkable_not_passed(capsys):
    """A splash configuration whose tracing asks the TPU generation (block_kv 384 with a
    128 compute block) cannot be lowered on a CPU machine: reported NOT CHECKED (exit 1),
    never lowered and never a lowering failure of the kernel."""
    from pathlib import Path

    from kernel_harness import cli
    from kernel_harness.checks.lowering import lower_case
    from kernel_harness.families.splash.cases import SplashCase
    from kernel_harness.records.registry import get_family

    case_json = (Path(__file__).with_name("splash_needs_tpu_case.json")).read_text().strip()
    result = lower_case(get_family("splash"), SplashCase.from_json(case_json))
    assert not result.ok and result.needs_tpu and "NOT CHECKABLE" in result.describe()
    assert cli.main(["lower", "splash", "--case", case_json]) == 1
    assert "NOT CHECKED" in capsys.readouterr().out


def test_the_first_case_lowered_is_the_strategys_first_draw_not_a_shrunk_search():
    """``lowers-for-tpu`` first lowers one case of a family without seed cases to see
    whether tracing asks the TPU generation: its strategy's first (simplest) draw, not a
    shrinking search (about 100 draws, 1.6 to 3.6 s per narrowed sdpa, for the same case)."""
    import dataclasses

    sdpa = get_family("sdpa")
    assert not list(sdpa.seed_cases(frozenset()))  # the path under test
    draws = []
    counted = dataclasses.replace(
        sdpa, cases=lambda: sdpa.cases().map(lambda c: draws.append(c) or c))
    lowering.check_lowerable_here(counted)  # sdpa's trace does not ask: no SKIP
    assert 1 <= len(draws) <= 2, len(draws)
