"""ops.attention.segments: the one spelling of segment layouts (runs of id, length)."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_harness.ops.attention.segments import (
    check_pair,
    check_rows,
    check_runs,
    segment_ids,
    stacked_ids,
)


def test_runs_expand_to_ids_in_order() -> None:
    assert segment_ids(((2, 2), (0, 3), (1, 1), (2, 1))).tolist() == [2, 2, 0, 0, 0, 1, 2]
    got = stacked_ids([((2, 2), (0, 1)), ((5, 3),)])
    assert got.dtype == np.int32 and got.tolist() == [[2, 2, 0], [5, 5, 5]]


@pytest.mark.parametrize(("runs", "message"), [
    ((), "at least one"),
    (((0, 4, 1),), r"run \(0, 4, 1\) must be an \(id, length\) pair"),
    (((0, 0), (1, 4)), r"run \(0, 0\) must have length >= 1"),
    (((-1, 4),), r"run \(-1, 4\) must have id >= 0"),
    (((0, 3),), "must sum to 4"),
])
def test_bad_runs_say_what_is_wrong(runs: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_runs("q_segments", runs, 4)


def test_rows_need_one_layout_per_batch_row() -> None:
    check_rows("kv_segments", (((0, 4),), ((1, 2), (0, 2))), 2, 4)
    with pytest.raises(ValueError, match=r"one layout per batch row \(2\), got 1"):
        check_rows("kv_segments", (((0, 4),),), 2, 4)
    with pytest.raises(ValueError, match="kv_segments run lengths must sum to 4"):
        check_rows("kv_segments", (((0, 4),), ((0, 3),)), 2, 4)


def test_query_and_key_layouts_come_together() -> None:
    check_pair(None, None)
    check_pair(((0, 1),), ((0, 1),))
    with pytest.raises(ValueError, match="both be given or both be None"):
        check_pair(((0, 1),), None)
