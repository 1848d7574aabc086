"""Segment ids are labels (only their equality matters), so the attention op's segment
drawers sometimes spread them far apart: past 127 and 255, with distinct ids equal in
their low 8 bits (adversarial round 3: a kernel that truncated ids to 8 bits passed while
ids stayed below 4), or move them, consecutive, past what a float holds exactly (round 4:
a kernel that carried ids through bfloat16 passed). Every family that draws segments
reaches them within ci-sized runs, and the relabelling keeps which positions share a
segment and the ids' order."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kernel_harness import get_family
from kernel_harness.ops.attention.segment_draws import (
    ID_BASES,
    ID_STRIDES,
    aligned_runs,
    packed_runs,
    relabelled,
    segment_layouts,
)
from tests.helpers.mode_reach import assert_reaches, reach
from tests.helpers.per_push import per_push

WIDE = ("segment-id>127", "segment-id>255", "segment-ids-equal-in-8-bits",
        "segment-ids-equal-in-bfloat16")


def _ids(case: object) -> set[int]:
    rows = [*(getattr(case, "q_segments", None) or ()), *(getattr(case, "kv_segments", None)
                                                        or ())]
    if rows and isinstance(rows[0][0], int):  # one layout for every row (splash, hstu)
        rows = [rows]
    return {i for row in rows for i, _ in row}


def wide_events(case: object) -> list[str]:
    """How far apart a case's segment ids are (this test's own labels)."""
    ids = _ids(case)
    ev = []
    if any(i > 127 for i in ids):
        ev.append("segment-id>127")
    if any(i > 255 for i in ids):
        ev.append("segment-id>255")
    if len({i & 0xFF for i in ids}) < len(ids):
        ev.append("segment-ids-equal-in-8-bits")
    if len({float(np.float32(i).astype(ml_dtypes.bfloat16)) for i in ids}) < len(ids):
        ev.append("segment-ids-equal-in-bfloat16")
    return ev


@pytest.mark.parametrize("name", per_push(["gpu-mha", "flash", "splash"]))
def test_ci_sized_draws_reach_ids_past_255_that_agree_in_8_bits(name):
    family = get_family(name)
    assert_reaches(reach(family.cases(), wide_events, runs=5), WIDE, name)


def test_relabelling_keeps_runs_and_order():
    runs = ((2, 3), (0, 1), (2, 2), (1, 4))
    wide = relabelled(runs, lambda i: 127 + 256 * i)
    assert wide == ((639, 3), (127, 1), (639, 2), (383, 4))


@settings(max_examples=80, deadline=None, database=None, derandomize=True,
          phases=(Phase.generate,), suppress_health_check=list(HealthCheck))
@given(st.data())
def test_drawn_ids_are_small_strided_or_consecutive_past_a_base(data):
    q, kv = data.draw(segment_layouts(2, 24, 24, causal=data.draw(st.booleans())))
    ids = {i for row in (*q, *kv) for i, _ in row}
    assert min(ids) >= 0 and max(ids) < 2**31
    assert (max(ids) <= 4 or any(len({i % s for i in ids}) == 1 for s in ID_STRIDES)
            or any(b <= min(ids) and max(ids) <= b + 4 for b in ID_BASES)), ids


@settings(max_examples=40, deadline=None, database=None, derandomize=True,
          phases=(Phase.generate,), suppress_health_check=list(HealthCheck))
@given(st.data())
def test_packed_kv_ids_are_the_queries_ids(data):
    q = data.draw(st.composite(lambda draw: packed_runs(draw, 40, None))())
    kv = data.draw(st.composite(lambda draw: aligned_runs(draw, q, 56))())
    assert {i for i, _ in kv} <= {i for i, _ in q}
