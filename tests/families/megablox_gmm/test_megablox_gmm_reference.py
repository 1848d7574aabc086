"""The megablox-gmm reference against values computed by hand with numpy loops."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_harness.ops.grouped_matmul.cases import GmmCase
from kernel_harness.ops.grouped_matmul.reference import onehot_rows, reference


def _by_hand(case: GmmCase, x: dict[str, np.ndarray]):
    lhs, rhs, do = (np.asarray(x[n], np.float64) for n in ("lhs", "rhs", "do"))
    if case.transpose_rhs:
        rhs = rhs.transpose(0, 2, 1)
    out = np.zeros((case.m, case.n))
    dlhs = np.zeros((case.m, case.k))
    drhs = np.zeros((case.rhs_groups, case.k, case.n))
    start = 0
    for g, size in enumerate(case.group_sizes):
        j = g - case.offset
        if 0 <= j < case.rhs_groups:
            for r in range(start, start + size):
                out[r] = lhs[r] @ rhs[j]
                dlhs[r] = do[r] @ rhs[j].T
                drhs[j] += np.outer(lhs[r], do[r])
        start += size
    if case.transpose_rhs:
        drhs = drhs.transpose(0, 2, 1)
    return {"out": out, "dlhs": dlhs, "drhs": drhs}


@pytest.mark.parametrize("case", [
    GmmCase(dtype="float32", seed=3, m=16, k=5, n=3, group_sizes=(0, 3, 7, 0, 4),
            tiling=(8, 128, 128)),
    GmmCase(dtype="float32", seed=4, m=16, k=4, n=6, group_sizes=(2, 5, 0, 6),
            group_offset=1, local_groups=2, tiling=(8, 128, 128), transpose_rhs=True),
    GmmCase(dtype="bfloat16", seed=5, m=8, k=3, n=2, group_sizes=(8,), tiling=(8, 128, 128),
            out_dtype="bfloat16"),
])
def test_reference_matches_loops(case):
    x = case.materialize()
    ref, hand = reference(case, x), _by_hand(case, x)
    for name in ("out", "dlhs", "drhs"):
        np.testing.assert_allclose(ref[name], hand[name], rtol=1e-5, atol=1e-5, err_msg=name)


def test_rows_outside_groups_and_shards_are_zero_and_empty_groups_have_zero_drhs():
    case = GmmCase(dtype="float32", seed=1, m=16, k=4, n=4, group_sizes=(3, 0, 5),
                   group_offset=1, local_groups=2, tiling=(8, 128, 128))
    ref = reference(case, case.materialize())
    assert not ref["out"][:3].any() and not ref["out"][8:].any()  # other shard, no group
    assert ref["out"][3:8].any()
    assert not ref["drhs"][0].any()  # group 1 is empty
    np.testing.assert_array_equal(onehot_rows(case).sum(0), [0, 5])


def test_case_rejects_invalid_shapes():
    with pytest.raises(ValueError, match="tm must divide"):
        GmmCase(dtype="float32", seed=0, m=12, k=4, n=4, group_sizes=(12,), tiling=(8, 8, 8))
    with pytest.raises(ValueError, match="sum to"):
        GmmCase(dtype="float32", seed=0, m=8, k=4, n=4, group_sizes=(5, 4), tiling=(8, 8, 8))
    with pytest.raises(ValueError, match="float32"):
        GmmCase(dtype="float16", seed=0, m=8, k=4, n=4, group_sizes=(8,), tiling=(8, 8, 8))
    with pytest.raises(ValueError, match="shard"):
        GmmCase(dtype="float32", seed=0, m=8, k=4, n=4, group_sizes=(4, 4), group_offset=2,
                local_groups=1, tiling=(8, 8, 8))
