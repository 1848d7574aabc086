"""The ladder of sizes between a family's small size and each size it claims (issue 55,
item 5): rung extents stay between the two, keep the divisibility both share, grow with the
rung, visit every factor of 2, and map one (small, claimed) pair of extents to one extent
in every array of a rung, so the arrays' relations (equal axes) hold at every rung."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_harness.records.claims import Claim, interpolated, rung_extent
from kernel_harness.records.registry import get_family

FAMILIES = ("gpu-softmax", "gpu-norm", "megablox-gmm", "gpu-mha")


@given(small=st.integers(1, 1 << 20), claimed=st.integers(1, 1 << 20),
       fractions=st.lists(st.floats(0, 1), min_size=2, max_size=6))
def test_a_rung_extent_stays_between_keeps_the_gcd_and_moves_with_the_fraction(
        small, claimed, fractions):
    extents = [rung_extent(small, claimed, f) for f in sorted(fractions)]
    low, high = sorted((small, claimed))
    assert all(low <= e <= high and e % math.gcd(small, claimed) == 0 for e in extents)
    moves = extents if claimed >= small else [-e for e in extents]
    assert moves == sorted(moves)
    assert rung_extent(small, claimed, 0.0) == small
    assert rung_extent(small, claimed, 1.0) == claimed


def _pairs(small, claimed):
    """(array, axis) -> its (small, claimed) pair, axes aligned from the right."""
    out = {}
    for name, a in claimed.items():
        shape = small[name].shape if name in small else ()
        for i, c in enumerate(a.shape):
            j = i + len(shape) - len(a.shape)
            if 0 <= j < len(shape):
                out[name, i] = (shape[j], c)
    return out


def _relations(family, arrays):
    """The relations between the family's arrays that its kernel needs."""
    s = {n: tuple(a.shape) for n, a in arrays.items()}
    if family == "gpu-norm":
        return s["weight"] == s["bias"] == s["x"][-1:] and s["do"] == s["x"]
    if family == "megablox-gmm":
        return (s["lhs"][1] == s["rhs"][1] and s["group_sizes"] == s["rhs"][:1]
                and s["do"] == (s["lhs"][0], s["rhs"][2]))
    if family == "gpu-mha":
        return (s["q"] == s["k"] == s["v"] == s["do"]
                and s.get("segment_ids", s["q"][:2]) == s["q"][:2])
    return True


@pytest.mark.parametrize("family", FAMILIES)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_every_familys_ladder_is_monotone_bounded_and_consistent(family, data):
    claim = get_family(family).claimed
    small = claim.small()
    for claimed in claim.sizes():
        pairs = claim.pairs(claimed)
        drawn = data.draw(st.lists(st.floats(0, 1, exclude_max=True),
                                   min_size=claim.steps(claimed) * len(pairs),
                                   max_size=claim.steps(claimed) * len(pairs)))
        width, index = len(pairs), {p: i for i, p in enumerate(pairs)}

        def jitter(r, p, drawn=drawn, index=index, width=width):
            return drawn[r * width + index[p]]

        rungs = claim.ladder(claimed, jitter)
        assert rungs, claimed
        axes = _pairs(small, claimed)
        for arrays in rungs:
            assert arrays.keys() == claimed.keys()
            assert all(a.dtype == claimed[n].dtype for n, a in arrays.items())
            assert _relations(family, arrays), arrays
            by_pair = {}
            for (name, i), (s, c) in axes.items():
                e = arrays[name].shape[i]
                assert min(s, c) <= e <= max(s, c) and e % math.gcd(s, c) == 0
                assert by_pair.setdefault((s, c), e) == e, (s, c, arrays)
        for (name, i), (s, c) in axes.items():  # each axis moves from small to claimed
            extents = [s, *(a[name].shape[i] for a in rungs), c]
            assert extents == sorted(extents, reverse=c < s), (name, i, extents)
        # Every factor of 2 of the axis that grows most holds a rung (rounding aside).
        s, c = max(pairs, key=lambda p: abs(math.log(p[1] / p[0])))
        (name, i), _ = next(kv for kv in axes.items() if kv[1] == (s, c))
        extents = [s, *(a[name].shape[i] for a in rungs), c]
        assert max(b / a for a, b in zip(extents, extents[1:], strict=False)) <= 4.5, extents


def test_the_rungs_of_a_causal_claimed_size_are_traced_causal():
    claim = get_family("gpu-mha").claimed
    for claimed in claim.sizes():
        for arrays in claim.ladder(claimed, lambda r, p: 0.5):
            assert claim.uses(arrays) == claim.uses(claimed), arrays


def test_an_array_the_small_size_lacks_takes_the_pairs_of_equal_claimed_extents():
    small = {"q": jax.ShapeDtypeStruct((1, 128, 2, 64), jnp.float32)}
    claimed = {"q": jax.ShapeDtypeStruct((2, 4096, 8, 64), jnp.float32),
               "segment_ids": jax.ShapeDtypeStruct((2, 4096), jnp.int32)}
    rung = interpolated(small, claimed, lambda s, c: s + c)
    assert rung["q"].shape == (3, 4224, 10, 128)
    assert rung["segment_ids"].shape == (3, 4224)
    assert rung["segment_ids"].dtype == jnp.int32


def _claim(**kw):
    return Claim(reason="a test", sizes=lambda: ({"x": jax.ShapeDtypeStruct((4, 4096),
                                                                          jnp.float32)},),
                 small=lambda: {"x": jax.ShapeDtypeStruct((4, 128), jnp.float32)},
                 call=lambda impl, arrays: impl(arrays["x"]), **kw)


def test_a_claim_may_opt_out_of_the_ladder_saying_why():
    claim = _claim(no_ladder="the kernel is specialised to these two sizes")
    (claimed,) = claim.sizes()
    assert claim.steps(claimed) == 0 and claim.ladder(claimed, lambda r, p: 0.5) == []
    assert ("  no ladder between x (4, 128) and the claimed sizes: the kernel is specialised "
            "to these two sizes") in claim.describe()
    assert "one rung per factor of 2, jittered (5 rungs)" in _claim().describe()[-1]


def test_a_claim_may_declare_its_own_rung_maker():
    def rows_kept(small, claimed, extent):
        x = claimed["x"]
        return {"x": jax.ShapeDtypeStruct((x.shape[0], extent(128, x.shape[1])), x.dtype)}

    claim = _claim(rung=rows_kept)
    (claimed,) = claim.sizes()
    assert claim.pairs(claimed) == [(128, 4096)]
    shapes = [a["x"].shape for a in claim.ladder(claimed, lambda r, p: 0.0)]
    assert shapes == [(4, 256), (4, 512), (4, 1024), (4, 2048)]
