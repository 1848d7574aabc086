"""Every case a built-in strategy draws (seed cases included) leaves something of each
output inside the contract: a case whose ``valid`` mask excludes a whole output compares
nothing there, and the judge fails it ("no element compared"). Two strategies drew such
cases on unseeded dev runs (tpu-paged: every row empty outside the inline loop; flash: a
q segment layout in which no row sees a key)."""

from __future__ import annotations

import hypothesis
import numpy as np
import pytest
from hypothesis import strategies as st

from kernel_harness.records.registry import BUILTIN_FAMILIES, get_family
from tests.helpers.per_push import per_push

# Families whose valid() excludes elements (the others have nothing to check here) are
# found by drawing; 300 draws of a strategy take about a second (no kernel runs).
N_DRAWS = 300


def _wholly_excluded(fam, case) -> list[str]:
    masks = fam.valid(case)
    return [name for name, mask in masks.items() if not np.asarray(mask, bool).any()]


@pytest.mark.parametrize("name", per_push(sorted(BUILTIN_FAMILIES)))
def test_no_drawn_case_excludes_a_whole_output(name: str) -> None:
    fam = get_family(name)
    for case in fam.seed_cases(frozenset()):
        assert not _wholly_excluded(fam, case), case.to_json()

    @hypothesis.settings(max_examples=N_DRAWS, deadline=None, database=None,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(st.data())
    def draw(data: st.DataObject) -> None:
        case = data.draw(fam.cases())
        excluded = _wholly_excluded(fam, case)
        assert not excluded, f"{name}: {excluded} wholly outside the contract: {case.to_json()}"

    draw()


@hypothesis.settings(max_examples=N_DRAWS, deadline=None, database=None)
@hypothesis.given(st.data(), st.sampled_from((64, 128)), st.booleans())
def test_flash_q_layouts_always_have_a_row_that_sees_a_key(data, length, causal) -> None:
    """With batch 1 a q layout in which no row sees a key excluded flash's whole out and dq;
    the 300 whole-case draws above did not reach one, two unseeded dev runs did."""
    from kernel_harness.ops.attention.segment_draws import matched_runs, segment_runs
    from kernel_harness.ops.attention.segments import segment_ids

    kv = data.draw(segment_runs(length))
    q = data.draw(matched_runs(length, kv, causal=causal))
    kv_ids, first_q = segment_ids(kv), q[0][0]
    assert first_q in (kv_ids[:1] if causal else kv_ids), (kv, q)
