"""The rotary op (issue 57): its reference against a naive float64 rotation from the
definition, its backward (the transposed rotation) and against a Pallas kernel with a
backward (the user's rope of docs/extending.md), bad cases naming their field, and the
strategy reaching large and odd positions. No kernel library needed (both stacks)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings

from kernel_harness.ops.rotary.cases import (
    LARGE_POSITION,
    RotaryCase,
    reference,
    rotary_events,
    rotary_fields,
)
from kernel_harness.ops.rotary.reference import rotary_tables
from tests.helpers.rope_kernel import rope


def _case(**kw):
    fields = dict(dtype="float32", seed=5, seq_lens=(3, 6), offsets=(LARGE_POSITION + 7, 2),
                  heads=2, head_dim=16, rotary_dim=16, pairing="split", pad_tokens=1)
    return RotaryCase(**{**fields, **kw})


def _naive(x, positions, pairing, rotary_dim, base):
    """Element by element in float64, from the definition."""
    out = np.array(x, np.float64)
    for t, p in enumerate(positions):
        for i in range(rotary_dim // 2):
            angle = p * base ** (-2.0 * i / rotary_dim)
            a, b = (i, i + rotary_dim // 2) if pairing == "split" else (2 * i, 2 * i + 1)
            x1, x2 = x[t, :, a].astype(np.float64), x[t, :, b].astype(np.float64)
            out[t, :, a] = x1 * np.cos(angle) - x2 * np.sin(angle)
            out[t, :, b] = x2 * np.cos(angle) + x1 * np.sin(angle)
    return out


@pytest.mark.parametrize("pairing", ["split", "interleaved"])
@pytest.mark.parametrize("rotary_dim", [16, 8])
def test_the_reference_is_the_definition(pairing, rotary_dim):
    case = _case(pairing=pairing, rotary_dim=rotary_dim)
    inputs = case.materialize()
    got = reference(case, inputs)
    want = _naive(inputs["x"], case.positions(), pairing, rotary_dim, case.base)
    assert np.abs(got["out"] - want).max() <= 2e-6 * np.abs(want).max()
    assert np.array_equal(got["out"][..., rotary_dim:], inputs["x"][..., rotary_dim:])
    # The backward is the transposed rotation: <R x, g> = <x, R^T g>.
    lhs = np.vdot(got["out"].astype(np.float64), inputs["dout"])
    rhs = np.vdot(inputs["x"].astype(np.float64), got["dx"])
    assert abs(lhs - rhs) <= 1e-5 * np.abs(got["out"]).sum()


def test_the_tables_are_the_definition_at_large_positions():
    """A float32 angle at 2^16 + 7 is off by up to 2^-8 rad; the tables are not."""
    case = _case()
    inputs = case.materialize()
    p = LARGE_POSITION + 7
    assert abs(inputs["cos"][p, 0] - np.cos(p)) < 1e-7
    angle32 = np.float32(p) * np.float32(1.0) + np.float32(0.3)
    assert abs(np.float64(angle32) - (p + 0.3)) > 1e-4  # float32 cannot hold it


def test_the_reference_matches_a_pallas_rope_with_a_backward():
    """The op's out and dx against the user's rope kernel (split pairs, per-row tables)."""
    import jax

    case = _case(heads=1, head_dim=16, pad_tokens=0)
    inputs = case.materialize()
    cos, sin = (jnp.asarray(t, jnp.float32) for t in rotary_tables(case.positions(), 16,
                                                                     case.base))
    x = jnp.asarray(inputs["x"][:, 0])
    out, vjp = jax.vjp(lambda a: rope(a, cos, sin, block_rows=8, interpret=True), x)
    want = reference(case, inputs)
    assert np.abs(np.asarray(out) - want["out"][:, 0]).max() < 1e-5
    dx = vjp(jnp.asarray(inputs["dout"][:, 0]))[0]
    assert np.abs(np.asarray(dx) - want["dx"][:, 0]).max() < 1e-5


@pytest.mark.parametrize(("change", "message"), [
    (dict(seq_lens=(3,)), "one entry per sequence"),
    (dict(seq_lens=(0, 6)), "seq_lens must be >= 1"),
    (dict(offsets=(-1, 2)), "offsets >= 0"),
    (dict(rotary_dim=7), "rotary_dim must be even"),
    (dict(rotary_dim=32), "rotary_dim must be even and <= head_dim"),
    (dict(pairing="halves"), "pairing must be one of"),
    (dict(base=1.0), "base must be > 1"),
    (dict(pad_tokens=-2), "pad_tokens must be >= 0"),
])
def test_bad_cases_name_the_field(change, message):
    with pytest.raises(ValueError, match=message):
        _case(**change)


def test_the_strategy_reaches_large_and_odd_positions():
    seen: set[str] = set()

    @settings(max_examples=40, deadline=None, derandomize=True, database=None)
    @given(rotary_fields(head_dims=(16,)))
    def draw(fields):
        seen.update(rotary_events(RotaryCase(**fields)))

    draw()
    assert {"large-positions", "odd-offset", "zero-offset", "multi-seq", "partial-rotary",
            "pad-tokens", "pairing:split", "pairing:interleaved"} <= seen
