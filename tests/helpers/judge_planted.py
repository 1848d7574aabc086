"""Planted implementations for the judge's holes (issue 11), used through ``--impl``.

Each wraps the pristine SDPA implementation and plants one *local* error that the old
judge (one global scale per output, NaN compared by count) let through: a 1% error in
one key row of one head of dv, a 5% error in the longest quarter of output rows, dq 6%
off in a quarter of rows, a softmax without max-subtraction. Gradients are planted with
``jax.custom_vjp`` so only the named output is wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from kernel_harness.families.sdpa.kernel import xla_sdpa


def _with_grads(edit: Callable[[Any, Any, Any], tuple[Any, Any, Any]]) -> Callable[..., Any]:
    """An sdpa whose forward is pristine and whose (dq, dk, dv) pass through ``edit``."""

    def impl(query, key, value, bias=None, mask=None, **opts):
        @jax.custom_vjp
        def attend(q, k, v):
            return xla_sdpa(q, k, v, bias, mask, **opts)

        def fwd(q, k, v):
            out, vjp = jax.vjp(lambda q, k, v: xla_sdpa(q, k, v, bias, mask, **opts), q, k, v)
            return out, vjp

        def bwd(vjp, do):
            return edit(*vjp(do))

        attend.defvjp(fwd, bwd)
        return attend(query, key, value)

    return impl


def _dv_row_off(dq, dk, dv):
    # key row kv_len - 24 of kv head 0: under causal it is seen by the last 24 queries
    # only, so its |dv| is ~1/30 of the largest.
    return dq, dk, dv.at[:, -24, 0, :].multiply(1.01)


#: dv 1% off in one key row of one head.
dv_one_row_1pct = _with_grads(_dv_row_off)


def _dq_quarter_off(dq, dk, dv):
    n = dq.shape[1]
    return dq.at[:, 3 * n // 4:].multiply(1.06), dk, dv


#: dq 6% off in the last (longest, under causal) quarter of query rows.
dq_quarter_6pct = _with_grads(_dq_quarter_off)


def out_long_rows_5pct(query, key, value, bias=None, mask=None, **opts):
    """The output 5% off in the last (under causal: longest) quarter of query rows."""
    out = xla_sdpa(query, key, value, bias, mask, **opts)
    n = out.shape[1]
    return out.at[:, 3 * n // 4:].multiply(1.05)


def no_max_subtraction(query, key, value, bias=None, mask=None, **opts):
    """softmax as exp(s) / sum exp(s), without subtracting the row max first (in the
    inputs' dtype, as a kernel would): fine at O(1) logits, inf/NaN or wrong at large."""
    scale = opts["scale"] or 1.0 / jnp.sqrt(query.shape[-1]).astype(jnp.float32)
    s = jnp.einsum("btnh,bsnh->bnts", query, key).astype(query.dtype) * scale
    t, k = s.shape[-2:]
    if opts["is_causal"]:
        s = jnp.where(jnp.arange(k)[None, :] <= jnp.arange(t)[:, None], s, -jnp.inf)
    p = jnp.exp(s)
    p = p / p.sum(-1, keepdims=True)
    return jnp.einsum("bnts,bsnh->btnh", p, value).astype(query.dtype)


def garbage(x):
    """For the toy families: an answer unrelated to the input."""
    return jnp.zeros_like(x) + 123.0


def _toy_families() -> tuple[Any, Any]:
    import dataclasses

    import numpy as np

    from tests.helpers import toy_family

    def nan_reference(case, inputs):
        ref = toy_family._reference(case, inputs)
        return {**ref, "y": np.full_like(ref["y"], np.nan)}

    nan_ref = dataclasses.replace(toy_family.FAMILY, name="toy", reference=nan_reference)
    excluded = dataclasses.replace(
        toy_family.FAMILY, name="toy", valid=lambda case: {"y": np.zeros(case.length, bool)}
    )
    return nan_ref, excluded


#: The toy family with a planted all-NaN reference for ``y``.
#: The toy family whose contract (``valid``) excludes every element of ``y``.
NAN_REFERENCE_TOY, ALL_EXCLUDED_TOY = _toy_families()


def tiny_future_leak(q, k, v, q_seg, kv_seg, **kwargs):
    """For the toy attention family (tests/helpers/planted_kernels.py): causal attention
    that lets future keys leak in with weight 1e-6 -- far below any tolerance, but an
    invisible input changing the output is a bug."""
    from tests.helpers import planted_kernels as pk

    causal = pk.tiny_attention(q, k, v, q_seg, kv_seg, **kwargs)
    if not kwargs["causal"]:
        return causal
    full = pk.tiny_attention(q, k, v, q_seg, kv_seg, **{**kwargs, "causal": False})
    return (causal.astype(jnp.float32) * (1 - 1e-6) + full.astype(jnp.float32) * 1e-6
            ).astype(causal.dtype)


# --- splash (impl signature: a make_splash_mha-like factory) -----------------------------


def residuals_out_changed(mask, **kw):
    """Splash whose ``save_residuals=True`` kernel returns an output 1% off; the plain
    forward and the gradients are pristine (the old judge discarded this output)."""
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel

    good = splash_attention_kernel.make_splash_mha(mask, **kw)
    if not kw["save_residuals"]:
        return good

    def kernel(q, k, v, segment_ids=None, sinks=None):
        out, residuals = good(q, k, v, segment_ids, sinks)
        return out * 1.01, residuals

    return kernel


def smallest_head_dsinks_dropped(mask, **kw):
    """Splash whose sink gradient is zero for the head with the smallest |dsinks| (per
    example: use batch 1); everything else is pristine."""
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel

    good = splash_attention_kernel.make_splash_mha(mask, **kw)
    if kw["save_residuals"]:
        return good

    def kernel(q, k, v, segment_ids=None, sinks=None):
        if sinks is None:
            return good(q, k, v, segment_ids, sinks)

        @jax.custom_vjp
        def f(q, k, v, sinks):
            return good(q, k, v, segment_ids, sinks)

        def fwd(q, k, v, sinks):
            return f(q, k, v, sinks), (q, k, v, sinks)

        def bwd(res, g):
            q, k, v, sinks = res
            _, vjp = jax.vjp(lambda q, k, v, s: good(q, k, v, segment_ids, s), q, k, v, sinks)
            dq, dk, dv, ds = vjp(g)
            return dq, dk, dv, ds.at[jnp.argmin(jnp.abs(ds))].set(0.0)

        f.defvjp(fwd, bwd)
        return f(q, k, v, sinks)

    return kernel


# --- coarse intermediates (the calibrated judge, README "Calibrated bounds") -------------


def _round_bits(x, bits: int):
    """``x`` rounded to ``bits`` significant bits (bfloat16 has 8, float8_e4m3 4), with
    the exponent range of float32; the gradient passes straight through."""
    mant, exp = jnp.frexp(x)
    rounded = jnp.ldexp(jnp.round(mant * 2.0**bits) / 2.0**bits, exp)
    return x + jax.lax.stop_gradient(rounded - x)


def _coarse_sdpa(query, key, value, *, p_bits: int | None = None, acc_bits: int | None = None,
                 block: int = 64, **opts):
    """Causal/full sdpa in float32 (no bias, mask, window or lengths: for hand-made cases)
    whose probabilities are rounded to ``p_bits`` significant bits and/or whose output
    accumulator is rounded to ``acc_bits`` bits after every block of ``block`` keys; the
    output in the inputs' dtype."""
    scale = opts["scale"] or 1.0 / float(query.shape[-1]) ** 0.5
    group = query.shape[2] // key.shape[2]
    q = query.astype(jnp.float32)
    k = jnp.repeat(key, group, axis=2).astype(jnp.float32)
    v = jnp.repeat(value, group, axis=2).astype(jnp.float32)
    s = jnp.einsum("btnh,bsnh->bnts", q, k, precision="highest") * scale
    t, n = s.shape[-2:]
    if opts["is_causal"]:
        s = jnp.where(jnp.arange(n)[None, :] <= jnp.arange(t)[:, None], s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    if p_bits is not None:
        p = _round_bits(p, p_bits)
    acc = jnp.zeros(q.shape, jnp.float32)
    for start in range(0, n, block):
        part = jnp.einsum("bnts,bsnh->btnh", p[..., start:start + block],
                          v[:, start:start + block], precision="highest")
        acc = acc + part
        if acc_bits is not None:
            acc = _round_bits(acc, acc_bits)
    return acc.astype(query.dtype)


def p_rounded_4bits(query, key, value, bias=None, mask=None, **opts):
    """The softmax probabilities rounded to 4 significant bits (float8_e4m3's mantissa:
    coarser than bfloat16's 8) before the PV product; everything else float32."""
    return _coarse_sdpa(query, key, value, p_bits=4, **opts)


def p_rounded_6bits(query, key, value, bias=None, mask=None, **opts):
    """The probabilities rounded to 6 significant bits (4x coarser than bfloat16)."""
    return _coarse_sdpa(query, key, value, p_bits=6, **opts)


def acc_rounded_4bits(query, key, value, bias=None, mask=None, **opts):
    """The output accumulator rounded to 4 significant bits after every 64 keys."""
    return _coarse_sdpa(query, key, value, acc_bits=4, **opts)


def acc_rounded_6bits(query, key, value, bias=None, mask=None, **opts):
    """The output accumulator rounded to 6 significant bits after every 64 keys."""
    return _coarse_sdpa(query, key, value, acc_bits=6, **opts)


def fp32_coarse_free(query, key, value, bias=None, mask=None, **opts):
    """The same float32 computation with nothing rounded (the control: must pass)."""
    return _coarse_sdpa(query, key, value, **opts)


def splash_out_quarter_5pct(mask, **kw):
    """Splash whose plain forward output is 5% off in the last quarter of query rows (the
    ``save_residuals`` kernel is pristine): for the calibrated bfloat16 judge."""
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel

    good = splash_attention_kernel.make_splash_mha(mask, **kw)
    if kw["save_residuals"]:
        return good

    def kernel(q, k, v, segment_ids=None, sinks=None):
        out = good(q, k, v, segment_ids, sinks)
        n = out.shape[-2]
        return out.at[..., 3 * n // 4:, :].multiply(1.05)

    return kernel
