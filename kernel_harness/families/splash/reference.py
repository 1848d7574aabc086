"""The independent splash reference: dense masks built from the case description and
plain-jnp softmax attention at HIGHEST precision in float32.

Nothing here uses splash's own masks, mask info or reference function: every
mask kind is written out below as an index formula on a dense grid.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.families.splash.cases import (
    MaskExpr,
    SplashCase,
    numpy_pattern,
    parse_mask,
    segment_ids,
)

_HIGHEST = jax.lax.Precision.HIGHEST


def dense_mask(expr: MaskExpr, shape: tuple[int, int]) -> np.ndarray:
    """The [q_len, kv_len] boolean mask of a parsed mask expression."""
    if expr.kind == "and":
        return dense_mask(expr.children[0], shape) & dense_mask(expr.children[1], shape)
    if expr.kind == "or":
        return dense_mask(expr.children[0], shape) | dense_mask(expr.children[1], shape)
    if expr.kind == "numpy":
        return dense_mask(expr.children[0], shape)
    if expr.kind in ("random", "boxes"):
        return numpy_pattern(expr, shape)
    qi = np.arange(shape[0])[:, None]
    kj = np.arange(shape[1])[None, :]
    p = dict(expr.params)
    if expr.kind == "full":
        return np.ones(shape, bool)
    if expr.kind == "causal":
        return kj <= qi + p["offset"]
    if expr.kind == "local":
        centre = qi + p["offset"]
        lo = np.full(shape, True) if p["left"] is None else kj >= centre - p["left"]
        hi = np.full(shape, True) if p["right"] is None else kj <= centre + p["right"]
        return lo & hi
    if expr.kind == "chunked":
        return (qi // p["chunk"] == kj // p["chunk"]) & (kj <= qi)
    raise ValueError(f"unknown mask kind {expr.kind!r}")


def _mask_key(case: SplashCase) -> tuple[Any, ...]:
    return (case.head_masks(), case.q_len, case.kv_len, case.q_segments, case.kv_segments)


@functools.lru_cache(maxsize=256)
def _allowed(key: tuple[Any, ...]) -> np.ndarray:
    masks, q_len, kv_len, q_segs, kv_segs = key
    by_spec = {s: dense_mask(parse_mask(s), (q_len, kv_len)) for s in set(masks)}
    allowed = np.stack([by_spec[s] for s in masks])
    if q_segs is not None:
        allowed = allowed & (segment_ids(q_segs)[:, None] == segment_ids(kv_segs)[None, :])
    allowed.setflags(write=False)
    return allowed


def allowed_mask(case: SplashCase) -> np.ndarray:
    """[num_q_heads, q_len, kv_len]: which key each query of each head may see
    (static mask and segment ids together)."""
    return _allowed(_mask_key(case))


def empty_rows(case: SplashCase) -> np.ndarray:
    """[num_q_heads, q_len]: rows that see no key at all."""
    return ~allowed_mask(case).any(axis=-1)


def attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    sinks: jax.Array | None,
    allowed: jax.Array,
    *,
    soft_cap: float | None,
) -> tuple[jax.Array, jax.Array]:
    """Masked softmax attention with optional soft cap and sinks, in float32.

    q: [b, hq, q, d]; k, v: [b, hkv, kv, d] (query head h uses kv head
    h // (hq // hkv)); allowed: [hq, q, kv]; sinks: [hq] or None. Returns
    ``(out, lse)``; a row that sees nothing has out 0 and lse -inf (or the
    sink's value when there are sinks).
    """
    group = q.shape[1] // k.shape[1]
    k = jnp.repeat(k, group, axis=1)
    v = jnp.repeat(v, group, axis=1)
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k, precision=_HIGHEST)
    if soft_cap is not None:
        s = soft_cap * jnp.tanh(s / soft_cap)
    s = jnp.where(allowed[None], s, -jnp.inf)
    m = jnp.max(s, axis=-1)
    if sinks is not None:
        m = jnp.maximum(m, sinks[None, :, None])
    m = jax.lax.stop_gradient(jnp.where(jnp.isfinite(m), m, 0.0))
    p = jnp.exp(s - m[..., None])
    denom = jnp.sum(p, axis=-1)
    if sinks is not None:
        denom = denom + jnp.exp(sinks[None, :, None] - m)
    safe = jnp.where(denom > 0, denom, 1.0)
    out = jnp.einsum("bhqk,bhkd->bhqd", p, v, precision=_HIGHEST) / safe[..., None]
    lse = jnp.where(denom > 0, m + jnp.log(safe), -jnp.inf)
    return out, lse


@functools.lru_cache(maxsize=64)
def _program(soft_cap: float | None, has_sinks: bool):
    def program(q, k, v, sinks, allowed, do):
        def f(q, k, v, sinks):
            return attention(q, k, v, sinks if has_sinks else None, allowed, soft_cap=soft_cap)

        (out, lse), vjp = jax.vjp(f, q, k, v, sinks)
        dq, dk, dv, dsinks = vjp((do, jnp.zeros_like(lse)))
        return {"out": out, "dq": dq, "dk": dk, "dv": dv, "lse": lse, "dsinks": dsinks}

    return jax.jit(program)


def reference(case: SplashCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every checked output (out, dq, dk, dv, lse, dsinks) from the dtype-rounded inputs,
    computed in float32; ``dsinks`` is empty (shape (0,)) when the case has no sinks."""
    f32 = lambda name: jnp.asarray(inputs[name], jnp.float32)  # noqa: E731
    sinks = f32("sinks") if case.sinks else jnp.zeros((case.num_q_heads,), jnp.float32)
    with jax.default_device(jax.devices("cpu")[0]):
        res = _program(case.soft_cap, case.sinks)(
            f32("q"), f32("k"), f32("v"), sinks, jnp.asarray(allowed_mask(case)), f32("do")
        )
        res = {name: np.asarray(x, np.float32) for name, x in res.items()}
    if not case.sinks:
        res["dsinks"] = np.zeros((0,), np.float32)
    return res
