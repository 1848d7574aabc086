"""Round 12 of the independent adversarial set: 25 implementations, five for each of
gpu-softmax, gpu-norm, megablox-gmm, gpu-mha and gpu-decode.

Rules as followed: each implementation is wrong (its result is not the op's) for inputs
its family claims to support (``kernel-harness describe``: the claimed sizes, the
contract's value ranges, eps, group sizes), and is meant to pass
``kernel-harness check FAMILY --impl tests.adversarial.impls_round12:NAME --profile ci
--max-examples 8 --no-isolate``. Nothing here was run through the harness; wrongness was
confirmed with small standalone scripts (interpret mode, against jax.numpy) or by
reasoning/tracing, as each docstring says.

What was read: README.md, docs/ (not docs/adversarial.md), kernel_harness/ (checks/
kernel_bodies.py, size_programs.py, claimed_sizes.py, wrapper_standin.py, run/impl_source.py,
the families' adapters and the op case strategies), the jax Pallas op sources the families
wrap, and ``describe`` for the five families. Nothing under tests/, golden/ or git history.

Technique (all 25): every implementation runs the family's own Pallas op code, but with
the op's kernel function (or a kernel helper the kernel calls: megablox's store mask and
group size) swapped for a wrapper. The swap is done by rebuilding jax's own functions with
a copy of their globals (``_rebind``), so the wrapper code (a jax function) is the family's
and nothing global is changed. The kernel wrapper runs the pristine kernel body and then,
inside the same kernel, rewrites its output under a condition that is a traced value:

- Themes: (1) gates on values the strategies never draw but the contract claims (row
  maxima between -1e8 and -1e5, float32 rows above 1e7, float16 rows above 3e4, row
  variances above 1e6, eps between 1e-10 and 5e-8, visible key counts and start indices of
  thousands); (2) size gates whose integer thresholds are the SAME literal at every size and
  compare with an extent (``max(iota(block)) >= C``) or a program id, so the kernel body's
  digest (primitives with dtypes, floating literals) is identical at the small and the
  claimed sizes, which kernel_bodies.py says it does not see ("a constant the same at every
  size", "an integer bound that happens to be an extent", program ids / loop bounds); the
  thresholds sit just past the ci large-size caps (softmax rows capped at 2 of 8/64,
  mha contexts at 4352 tokens, 16 heads, 4 batch rows; gmm's collapse at 8192-row experts,
  forward tiles tn of 128/256; decode has no real large-size run at all); (3) the wrapper
  around the kernel is unchanged (the family's own jax wrapper), so claimed_sizes and
  the wrapper stand-in see the family's XLA program.
"""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas.ops.tpu.megablox import ops as _mops

from kernel_harness.families import gpu_common

_sm = gpu_common.triton_op("softmax")
_ln = gpu_common.triton_op("layer_norm")
_rms = gpu_common.triton_op("rms_norm")
_att = gpu_common.triton_op("attention")
_dec = gpu_common.triton_op("decode_attention")
_mgmm = _mops.backend


def _py(fn):
    """The Python function under a jit (or the function itself)."""
    return getattr(fn, "__wrapped__", fn)


def _rebind(fn, **names):
    """``fn`` (a Python function) with a copy of its globals where ``names`` replace theirs."""
    fn = _py(fn)
    scope = dict(fn.__globals__)
    scope.update(names)
    out = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)
    out.__kwdefaults__ = fn.__kwdefaults__
    out.__module__ = fn.__module__
    out.__qualname__ = fn.__qualname__
    out.__doc__ = fn.__doc__
    return out


def _lanes_at_least(n, c):
    """A traced ``n > c`` (n a block extent, c the same literal at every size)."""
    return jnp.max(lax.broadcasted_iota(jnp.int32, (n,), 0)) >= c


def _scaled(ref, cond, factor):
    """Rewrites the kernel output ``ref`` as ``ref * factor`` where ``cond``."""
    val = ref[...]
    ref[...] = jnp.where(cond, val.astype(jnp.float32) * factor,
                         val.astype(jnp.float32)).astype(ref.dtype)


# ----------------------------------------------------------------------------- softmax

_SM_KERNEL = _sm._vmappable_softmax_kernel


def _sm_row_max(input_ref):
    x = input_ref[...].astype(jnp.float32)
    return jnp.max(x)


def _sm_kernel_negative(input_ref, probs_ref, *, block_row):
    _SM_KERNEL(input_ref, probs_ref, block_row=block_row)
    mx = _sm_row_max(input_ref)
    _scaled(probs_ref, (mx < -1e5) & (mx > -1e8), 0.75)


def _sm_kernel_f32_big(input_ref, probs_ref, *, block_row):
    _SM_KERNEL(input_ref, probs_ref, block_row=block_row)
    mx = _sm_row_max(input_ref)
    p = probs_ref[...]
    low = p.astype(jnp.bfloat16).astype(p.dtype)
    probs_ref[...] = jnp.where((mx > 1e7) & (mx < 1e30), low, p)


def _sm_kernel_f16_big(input_ref, probs_ref, *, block_row):
    _SM_KERNEL(input_ref, probs_ref, block_row=block_row)
    mx = _sm_row_max(input_ref)
    x = input_ref[...].astype(jnp.float32)
    flat = jnp.where(jnp.isfinite(x), 1.0, 0.0)
    flat = flat / jnp.sum(flat)
    p = probs_ref[...]
    probs_ref[...] = jnp.where((mx > 3e4) & (mx < 7e4), flat.astype(p.dtype), p)


_SM_FN = _py(_sm.softmax)
_softmax_negative = _rebind(_SM_FN, _vmappable_softmax_kernel=_sm_kernel_negative)
_softmax_f32_big = _rebind(_SM_FN, _vmappable_softmax_kernel=_sm_kernel_f32_big)
_softmax_f16_big = _rebind(_SM_FN, _vmappable_softmax_kernel=_sm_kernel_f16_big)


def softmax_negative_scores(x, *, axis=-1, interpret=False):
    """Class: wrong for values never drawn. Where: every row whose largest logit lies in
    (-1e8, -1e5) (log-probabilities of long sequences, a masked row offset by a large
    negative bias) gets probabilities 0.75x the softmax (they sum to 0.75). Drawn row
    maxima: offsets 0/1000/-300/1e6/1e37/-1e9 (float16 -5.9e4) and relation shifts
    of +-3 scales, +100, -1000 never land there. Confirmed by running (interpret, row max
    -5e6). Expected to evade: kernel_bodies (the 1e5/1e8 literals are the same at every
    size), every real run (never drawn)."""
    return _softmax_negative(x, axis=axis, interpret=interpret)


def softmax_f32_large_logits_bf16(x, *, axis=-1, interpret=False):
    """Class: lower precision for values never drawn. Where: float32 rows whose largest
    logit is in (1e7, 1e30) come back rounded to bfloat16 (errs ~2e-3 relative against a
    5e-6 bound). Drawn float32 maxima sit near 4e4, 1e6 or 1e37: none in the gap. Confirmed
    by running (interpret, offset 1e9). Evades: no draw reaches it; the kernel digest is
    the same at every size."""
    return _softmax_f32_big(x, axis=axis, interpret=interpret)


def softmax_f16_large_logits_uniform(x, *, axis=-1, interpret=False):
    """Class: wrong for values never drawn. Where: a float16 row whose largest logit is
    above 3e4 (float16 holds up to 65504; the contract says the max subtraction keeps any
    offset from overflowing) returns the uniform distribution over its finite lanes.
    float16 draws reach at most ~1.7e4 (scale 3e3 plus shifts). Confirmed by running
    (interpret, float16 offset 4e4). Evades: never drawn; same digest at every size."""
    return _softmax_f16_big(x, axis=axis, interpret=interpret)


def _grid_softmax(kernel, x, interpret):
    """The softmax kernel on a grid of rows (one program a row) instead of vmapped."""
    n = x.shape[-1]
    rows = x.reshape(-1, n)
    block_row = pl.next_power_of_2(n)
    out = pl.pallas_call(
        lambda i_ref, o_ref: kernel(i_ref, o_ref, block_row=block_row),
        grid=(rows.shape[0],),
        in_specs=[pl.BlockSpec((None, n), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((None, n), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(rows.shape, x.dtype),
        interpret=interpret,
    )(rows)
    return out.reshape(x.shape)


def _sm_kernel_vocab_rows(input_ref, probs_ref, *, block_row):
    _SM_KERNEL(input_ref, probs_ref, block_row=block_row)
    cond = (pl.program_id(0) >= 8) & _lanes_at_least(block_row, 4095)
    _scaled(probs_ref, cond, 0.5)


def _sm_kernel_router_rows(input_ref, probs_ref, *, block_row):
    _SM_KERNEL(input_ref, probs_ref, block_row=block_row)
    cond = (pl.program_id(0) >= 1024) & _lanes_at_least(block_row, 127)
    _scaled(probs_ref, cond, 0.5)


def softmax_vocab_rows_past_8(x, *, axis=-1, interpret=False):
    """Class: wrong only at sizes the ci run does not reach. Where: rows of 4096+ lanes
    (n > 2048) from the 9th row on get half their probability: the claimed x (64, 32000)
    float32 is wrong in rows 8..63 (ci caps those rows at 2; the 8 x 262144 and 2x4 x 131072
    claims have 8 rows and stay right; small draws have n <= 1025 and <= 6 rows). The
    kernel runs on a grid of rows (program id) rather than vmapped. Confirmed by running
    (interpret, x (10, 2100): rows 8, 9 halved). Evades: kernel_bodies (the 8 and 4095 are
    the same literal at every size and compare with a program id and an iota extent),
    large-sizes (capped rows)."""
    if axis not in (-1, x.ndim - 1):
        raise NotImplementedError("reductions along non-trailing dimension unsupported")
    return _grid_softmax(_sm_kernel_vocab_rows, x, interpret)


def softmax_router_rows_past_1024(x, *, axis=-1, interpret=False):
    """Class: wrong only at sizes the ci run does not reach. Where: rows of 128+ lanes
    (n > 64) from row 1024 on get half their probability: the claimed x (4, 8192, 256)
    bfloat16 is wrong in its rows 1024.. (ci runs 2x64 of its rows; the 16384 router rows
    have 8 lanes; the other claims have <= 64 rows). Confirmed by tracing/reasoning (the
    same kernel as softmax_vocab_rows_past_8 with other literals, run at (10, 2100)).
    Evades: as softmax_vocab_rows_past_8."""
    if axis not in (-1, x.ndim - 1):
        raise NotImplementedError("reductions along non-trailing dimension unsupported")
    return _grid_softmax(_sm_kernel_router_rows, x, interpret)


# ----------------------------------------------------------------------------- norm

_LN_FWD_K = _ln.layer_norm_forward_kernel
_LN_DX_K = _ln.layer_norm_backward_kernel_dx
_LN_DWDB_K = _ln.layer_norm_backward_kernel_dw_db
_RMS_FWD_K = _rms.rms_norm_forward_kernel


def _row_var(x_ref):
    x = x_ref[...].astype(jnp.float32)
    mean = jnp.mean(x)
    return jnp.mean((x - mean) * (x - mean))


def _ln_fwd_wide(x_ref, weight_ref, bias_ref, o_ref, mean_ref=None, rstd_ref=None, *,
                 eps, block_size):
    _LN_FWD_K(x_ref, weight_ref, bias_ref, o_ref, mean_ref, rstd_ref, eps=eps,
              block_size=block_size)
    _scaled(o_ref, _row_var(x_ref) > 1e6, 0.9)


def _ln_fwd_eps(x_ref, weight_ref, bias_ref, o_ref, mean_ref=None, rstd_ref=None, *,
                eps, block_size):
    _LN_FWD_K(x_ref, weight_ref, bias_ref, o_ref, mean_ref, rstd_ref, eps=eps,
              block_size=block_size)
    small = jnp.float32(eps)
    _scaled(o_ref, (small >= 1e-10) & (small <= 5e-8), 0.9)


def _rms_fwd_big(x_ref, weight_ref, bias_ref, o_ref, rstd_ref=None, *, eps, block_size):
    _RMS_FWD_K(x_ref, weight_ref, bias_ref, o_ref, rstd_ref, eps=eps,
               block_size=block_size)
    x = x_ref[...].astype(jnp.float32)
    _scaled(o_ref, jnp.mean(x * x) > 1e12, 0.9)


def _ln_dx_wide(x_ref, weight_ref, bias_ref, do_ref, mean_ref, rstd_ref, dx_ref, *,
                eps, block_size):
    _LN_DX_K(x_ref, weight_ref, bias_ref, do_ref, mean_ref, rstd_ref, dx_ref, eps=eps,
             block_size=block_size)
    _scaled(dx_ref, _row_var(x_ref) > 1e6, 1.25)


def _ln_dwdb_far(x_ref, weight_ref, bias_ref, do_ref, mean_ref, rstd_ref, dw_ref, db_ref,
                 *, eps, block_m, block_n):
    _LN_DWDB_K(x_ref, weight_ref, bias_ref, do_ref, mean_ref, rstd_ref, dw_ref, db_ref,
               eps=eps, block_m=block_m, block_n=block_n)
    far = jnp.max(jnp.abs(x_ref[...].astype(jnp.float32))) > 3e5
    _scaled(db_ref, far, 0.8)


def _custom_vjp_variant(op, **names):
    """``op`` (a jax custom VJP whose primal is jitted) rebuilt with ``names`` swapped into
    its primal's, forward's and backward's globals."""
    new = jax.custom_vjp(_rebind(op.fun, **names), nondiff_argnums=op.nondiff_argnums)
    new.defvjp(_rebind(op.fwd, **names), _rebind(op.bwd, **names))
    return new


_LN_WIDE = _custom_vjp_variant(_ln.layer_norm, layer_norm_forward_kernel=_ln_fwd_wide)
_LN_EPS = _custom_vjp_variant(_ln.layer_norm, layer_norm_forward_kernel=_ln_fwd_eps)
_LN_DX = _custom_vjp_variant(_ln.layer_norm, layer_norm_backward_kernel_dx=_ln_dx_wide)
_LN_DB = _custom_vjp_variant(_ln.layer_norm, layer_norm_backward_kernel_dw_db=_ln_dwdb_far)
_RMS_BIG = _custom_vjp_variant(_rms.rms_norm, rms_norm_forward_kernel=_rms_fwd_big)


def _norm(ln, rms, op, x, weight, bias, eps, interpret):
    if op == "layer_norm":
        fn = ln
    elif op == "rms_norm":
        fn = rms
    else:
        raise ValueError(f"gpu-norm: unknown op {op!r}; use 'layer_norm' or 'rms_norm'")
    return fn(x, weight, bias, eps=eps, backward_pass_impl="triton", interpret=interpret)


def norm_layer_wide_rows(op, x, weight, bias, *, eps, interpret):
    """Class: wrong for values never drawn. Where: layer_norm rows whose variance exceeds
    1e6 (std > 1000: raw activations, un-normalized features) come out 0.9x (out and the
    VJP's forward). Drawn stds are spreads 1e-2/1/30 times relation scales up to 8 (<= 240).
    Confirmed by running (interpret, std 2000 row). Evades: never drawn; the 1e6 is the
    same literal at every size."""
    return _norm(_LN_WIDE, _rms.rms_norm, op, x, weight, bias, eps, interpret)


def norm_layer_tiny_eps(op, x, weight, bias, *, eps, interpret):
    """Class: wrong for values never drawn (eps). Where: layer_norm with eps in
    [1e-10, 5e-8] (e.g. 1e-9) returns 0.9x out. Drawn eps: 1e-5, 1e-6, 1e-3, 1e-1, 1e2,
    1e-12, times the relation's a^2 in {4, 1/16, 64, 1/4}: the nearest are 6.4e-11 and
    6.25e-8, outside. Confirmed by running (interpret, eps 1e-9). Evades: eps never drawn
    there; the kernel is the same at every size for a given eps."""
    return _norm(_LN_EPS, _rms.rms_norm, op, x, weight, bias, eps, interpret)


def norm_rms_large_activations(op, x, weight, bias, *, eps, interpret):
    """Class: wrong for values never drawn. Where: rms_norm rows with mean(x^2) > 1e12
    (rms > 1e6) come out 0.9x. Drawn rows reach |mean| 300 x 30 = 9000 times scale 8
    (mean(x^2) ~5e9). Confirmed by running (interpret, rows ~3e6). Evades: never drawn."""
    return _norm(_ln.layer_norm, _RMS_BIG, op, x, weight, bias, eps, interpret)


def norm_layer_dx_wide_rows(op, x, weight, bias, *, eps, interpret):
    """Class: wrong for values never drawn, backward only. Where: layer_norm dx of rows with
    variance > 1e6 is 1.25x. Confirmed by running (interpret, jax.vjp, std 2000 row).
    Evades: never drawn; forward is the pristine kernel."""
    return _norm(_LN_DX, _rms.rms_norm, op, x, weight, bias, eps, interpret)


def norm_layer_dbias_far_offset(op, x, weight, bias, *, eps, interpret):
    """Class: wrong for values never drawn, backward only. Where: layer_norm dbias of a
    column block whose x holds any |x| > 3e5 is 0.8x (layer_norm is claimed for any
    offset; float32 draws reach |x| ~7.3e4 = 300 spreads of 30 at scale 8). Confirmed by
    running (interpret, jax.vjp, offset 1e6). Evades: never drawn."""
    return _norm(_LN_DB, _rms.rms_norm, op, x, weight, bias, eps, interpret)


# ----------------------------------------------------------------------------- mha

_MHA_FWD_K = _att.mha_forward_kernel
_MHA_BWD_K = _att.mha_backward_kernel


def _mha_fwd_long_kv(q_ref, k_ref, v_ref, seg_ref, o_ref, *res, **kw):
    _MHA_FWD_K(q_ref, k_ref, v_ref, seg_ref, o_ref, *res, **kw)
    _scaled(o_ref, _lanes_at_least(k_ref.shape[0], 8191), 0.9)


def _mha_fwd_heads(q_ref, k_ref, v_ref, seg_ref, o_ref, *res, **kw):
    _MHA_FWD_K(q_ref, k_ref, v_ref, seg_ref, o_ref, *res, **kw)
    _scaled(o_ref, pl.program_id(2) >= 16, 0.9)


def _mha_fwd_lse_far(q_ref, k_ref, v_ref, seg_ref, o_ref, *res, **kw):
    _MHA_FWD_K(q_ref, k_ref, v_ref, seg_ref, o_ref, *res, **kw)
    far = pl.program_id(0) * kw["block_q"] >= 8192
    for ref in res:
        ref[...] = jnp.where(far, ref[...] + 0.01, ref[...])


def _mha_bwd_batch(q_ref, k_ref, v_ref, seg_ref, out_ref, do_ref, lse_ref, delta_ref,
                   dq_ref, dk_ref, dv_ref, **kw):
    _MHA_BWD_K(q_ref, k_ref, v_ref, seg_ref, out_ref, do_ref, lse_ref, delta_ref,
               dq_ref, dk_ref, dv_ref, **kw)
    late = pl.program_id(0) >= 4
    _scaled(dk_ref, late, 0.8)
    _scaled(dv_ref, late, 0.8)


def _mha_bwd_long_kv(q_ref, k_ref, v_ref, seg_ref, out_ref, do_ref, lse_ref, delta_ref,
                     dq_ref, dk_ref, dv_ref, **kw):
    _MHA_BWD_K(q_ref, k_ref, v_ref, seg_ref, out_ref, do_ref, lse_ref, delta_ref,
               dq_ref, dk_ref, dv_ref, **kw)
    _scaled(dq_ref, _lanes_at_least(k_ref.shape[0], 8191), 0.8)


def _mha_variant(**names):
    base = _att.mha
    fun = _rebind(base.fun, **names)
    new = jax.custom_vjp(fun, nondiff_argnums=base.nondiff_argnums)
    new.defvjp(_rebind(base.fwd, mha=new, **names), _rebind(base.bwd, **names))
    return new


_MHA_LONG = _mha_variant(mha_forward_kernel=_mha_fwd_long_kv)
_MHA_HEADS = _mha_variant(mha_forward_kernel=_mha_fwd_heads)
_MHA_LSE = _mha_variant(mha_forward_kernel=_mha_fwd_lse_far)
_MHA_BATCH = _mha_variant(mha_backward_kernel=_mha_bwd_batch)
_MHA_BWD_LONG = _mha_variant(mha_backward_kernel=_mha_bwd_long_kv)


def _mha(fn, q, k, v, segment_ids, sm_scale, causal, block_sizes, num_warps, num_stages,
         interpret, return_residuals):
    return fn(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
              block_sizes=block_sizes, num_warps=num_warps, num_stages=num_stages,
              interpret=interpret, return_residuals=return_residuals)


def mha_long_context_out(q, k, v, segment_ids, *, sm_scale, causal, block_sizes,
                         num_warps, num_stages, interpret, return_residuals=False):
    """Class: wrong only at sizes the ci run does not reach. Where: out is 0.9x whenever
    kv_len >= 8192 (the claimed 16k/32k/64k contexts; ci caps contexts at 4352 and the
    serving claim has 4096). The gate compares max(iota(kv block)) with 8191, a literal the
    same at every size, against an extent. Confirmed by tracing/reasoning (the same
    _scaled as the run-confirmed cases; interpret at 8192 keys is too slow here). Evades:
    kernel_bodies (literal constant at every size, compared with an extent), large-sizes
    (capped)."""
    return _mha(_MHA_LONG, q, k, v, segment_ids, sm_scale, causal, block_sizes, num_warps,
                num_stages, interpret, return_residuals)


def mha_heads_past_16(q, k, v, segment_ids, *, sm_scale, causal, block_sizes, num_warps,
                      num_stages, interpret, return_residuals=False):
    """Class: wrong only at sizes the ci run does not reach. Where: out of heads 16.. is
    0.9x (the claimed serving batch has 32 heads; ci runs 1..16 of them; small draws have
    few heads). Gate: program_id(2) >= 16. Confirmed by running (interpret, 18 heads of a
    tiny problem). Evades: kernel_bodies (a program id against a constant literal)."""
    return _mha(_MHA_HEADS, q, k, v, segment_ids, sm_scale, causal, block_sizes, num_warps,
                num_stages, interpret, return_residuals)


def mha_lse_far_queries(q, k, v, segment_ids, *, sm_scale, causal, block_sizes, num_warps,
                        num_stages, interpret, return_residuals=False):
    """Class: wrong only at sizes the ci run does not reach (residual). Where: the lse
    residual of queries at positions >= 8192 is 0.01 too large (and the backward, which
    reads it, is off too) for the 16k-64k claims; ci runs <= 4352 queries. Gate:
    program_id(0) * block_q >= 8192 (block_q an extent). Confirmed by tracing/reasoning.
    Evades: kernel_bodies (block_q is an extent; 8192 the same at every size)."""
    return _mha(_MHA_LSE, q, k, v, segment_ids, sm_scale, causal, block_sizes, num_warps,
                num_stages, interpret, return_residuals)


def mha_backward_batch_rows_past_4(q, k, v, segment_ids, *, sm_scale, causal, block_sizes,
                                   num_warps, num_stages, interpret, return_residuals=False):
    """Class: wrong only at sizes the ci run does not reach (backward). Where: dk and dv of
    batch rows 4.. are 0.8x (the claimed serving batch has 8 rows; ci runs 1..4). Gate:
    the backward grid's program_id(0) >= 4. Confirmed by running (interpret, batch 5).
    Evades: kernel_bodies (program id against a constant)."""
    return _mha(_MHA_BATCH, q, k, v, segment_ids, sm_scale, causal, block_sizes, num_warps,
                num_stages, interpret, return_residuals)


def mha_backward_long_context_dq(q, k, v, segment_ids, *, sm_scale, causal, block_sizes,
                                 num_warps, num_stages, interpret, return_residuals=False):
    """Class: wrong only at sizes the ci run does not reach (backward). Where: dq is 0.8x
    when kv_len >= 8192 (16k-64k claims). Confirmed by tracing/reasoning. Evades: as
    mha_long_context_out."""
    return _mha(_MHA_BWD_LONG, q, k, v, segment_ids, sm_scale, causal, block_sizes,
                num_warps, num_stages, interpret, return_residuals)


# ----------------------------------------------------------------------------- decode

_DEC_K = _dec.attn_forward_kernel


def _dec_split_long(q_ref, k_ref, v_ref, s_ref, e_ref, o_ref, *res, **kw):
    _DEC_K(q_ref, k_ref, v_ref, s_ref, e_ref, o_ref, *res, **kw)
    _scaled(o_ref, _lanes_at_least(k_ref.shape[0], 2047), 0.9)


def _dec_end_far(q_ref, k_ref, v_ref, s_ref, e_ref, o_ref, *res, **kw):
    _DEC_K(q_ref, k_ref, v_ref, s_ref, e_ref, o_ref, *res, **kw)
    if e_ref is not None:
        _scaled(o_ref, e_ref[...] >= 4096, 0.9)


def _dec_start_far(q_ref, k_ref, v_ref, s_ref, e_ref, o_ref, *res, **kw):
    _DEC_K(q_ref, k_ref, v_ref, s_ref, e_ref, o_ref, *res, **kw)
    if s_ref is not None:
        m_ref = res[1]
        m_ref[...] = jnp.where(s_ref[...] >= 1024, m_ref[...] + 0.01, m_ref[...])


def _dec_late_split(q_ref, k_ref, v_ref, s_ref, e_ref, o_ref, *res, **kw):
    _DEC_K(q_ref, k_ref, v_ref, s_ref, e_ref, o_ref, *res, **kw)
    late = (pl.program_id(1) >= 8) & _lanes_at_least(k_ref.shape[0], 1023)
    l_ref = res[0]
    l_ref[...] = jnp.where(late, l_ref[...] * 1.1, l_ref[...])


def _dec_visible_long(q_ref, k_ref, v_ref, s_ref, e_ref, o_ref, *res, **kw):
    _DEC_K(q_ref, k_ref, v_ref, s_ref, e_ref, o_ref, *res, **kw)
    if e_ref is not None:
        start = 0 if s_ref is None else s_ref[...]
        _scaled(o_ref, e_ref[...] - start >= 3000, 0.9)


def _decode_variant(kernel):
    unbatched = _rebind(_dec.decode_attn_unbatched, attn_forward_kernel=kernel)
    return (_rebind(_dec.gqa, decode_attn_unbatched=unbatched),
            _rebind(_dec.mqa, decode_attn_unbatched=unbatched))


_DEC_SPLIT = _decode_variant(_dec_split_long)
_DEC_END = _decode_variant(_dec_end_far)
_DEC_START = _decode_variant(_dec_start_far)
_DEC_LATE = _decode_variant(_dec_late_split)
_DEC_VISIBLE = _decode_variant(_dec_visible_long)


def _decode(fns, q, k, v, start_idx, kv_seq_len, entry, kwargs):
    gqa, mqa = fns
    if entry == "gqa":
        return gqa(q, k, v, start_idx, kv_seq_len, **kwargs)
    if entry == "mqa":
        if k.shape[2] != 1:
            raise ValueError(f"entry 'mqa' needs one kv head, got k of shape {k.shape}")
        return mqa(q, k[:, :, 0], v[:, :, 0], start_idx, kv_seq_len, **kwargs)
    raise ValueError(f"unknown entry {entry!r}; use 'gqa' or 'mqa'")


def decode_long_splits(q, k, v, start_idx, kv_seq_len, *, entry="gqa", **kwargs):
    """Class: wrong only at sizes never run. Where: each split's partial output is 0.9x
    when a split holds >= 2048 keys (both claims: 131072/16 and 32768/16 keys a split), so
    out is 0.9x (normalize_output) there; lse right. decode has no real large-size run;
    drawn caches are a few hundred keys. Confirmed by running (interpret, 2048 keys,
    k_splits 1: out 0.9x). Evades: kernel_bodies (iota extent vs a constant 2047)."""
    return _decode(_DEC_SPLIT, q, k, v, start_idx, kv_seq_len, entry, kwargs)


def decode_far_end_index(q, k, v, start_idx, kv_seq_len, *, entry="gqa", **kwargs):
    """Class: wrong for values never drawn (key lengths). Where: out is 0.9x for rows whose
    kv_seq_len (an end index, a kernel operand value) is >= 4096, possible only in caches of
    4096+ keys: the claims (128k, 32k) with lengths. Confirmed by running (interpret, a
    4096-key cache with kv_seq_len 4096, k_splits 16). Evades: the kernel body is the same
    at every size (the gate is a value); no run draws such a length."""
    return _decode(_DEC_END, q, k, v, start_idx, kv_seq_len, entry, kwargs)


def decode_far_start_lse(q, k, v, start_idx, kv_seq_len, *, entry="gqa", **kwargs):
    """Class: wrong for values never drawn (start offsets), residual only. Where: every
    split's m is 0.01 too large when start_idx >= 1024, so lse (m + log l) is off by ~0.01
    (and the XLA combine's rescaling cancels out of out). Only caches past 1024 keys
    (claims) reach it. Confirmed by running (interpret, start 1500 of 4096 keys).
    Evades: value gate, same kernel at every size."""
    return _decode(_DEC_START, q, k, v, start_idx, kv_seq_len, entry, kwargs)


def decode_late_splits_denominator(q, k, v, start_idx, kv_seq_len, *, entry="gqa",
                                   **kwargs):
    """Class: wrong only at sizes never run. Where: splits 8.. of 1024+ keys each report a
    denominator l 1.1x too large: lse and the normalized out are off at the claimed
    16-split caches. Gate: program_id(1) >= 8 and max(iota(split keys)) >= 1023, constants
    at every size. Confirmed by running (interpret, 16384 keys in 16 splits: lse off
    0.05). Evades: kernel_bodies."""
    return _decode(_DEC_LATE, q, k, v, start_idx, kv_seq_len, entry, kwargs)


def decode_long_visible_window(q, k, v, start_idx, kv_seq_len, *, entry="gqa", **kwargs):
    """Class: wrong for values never drawn. Where: out is 0.9x in rows whose visible window
    kv_seq_len - start_idx holds >= 3000 keys (long contexts; claims only). Confirmed by
    running (interpret, 4096 keys: window 4096 wrong, window 2096 right). Evades: value gate."""
    return _decode(_DEC_VISIBLE, q, k, v, start_idx, kv_seq_len, entry, kwargs)


# ----------------------------------------------------------------------------- gmm

_STORE_MASK = _mgmm._get_store_mask
_GROUP_SIZE = _mgmm._get_group_size


def _row_ids(grid_id, group_metadata, tm, tn):
    group_offsets, group_ids, m_tile_ids = group_metadata[:3]
    start = group_offsets[group_ids[grid_id]]
    rows = lax.broadcasted_iota(jnp.int32, (tm, tn), 0) + m_tile_ids[grid_id] * tm
    return rows, start


def _mask_big_group(*, grid_id, group_metadata, tm, tn):
    mask = _STORE_MASK(grid_id=grid_id, group_metadata=group_metadata, tm=tm, tn=tn)
    rows, start = _row_ids(grid_id, group_metadata, tm, tn)
    return mask & (rows - start < 8192)


def _mask_far_rows(*, grid_id, group_metadata, tm, tn):
    mask = _STORE_MASK(grid_id=grid_id, group_metadata=group_metadata, tm=tm, tn=tn)
    rows, _ = _row_ids(grid_id, group_metadata, tm, tn)
    return mask & (rows < 16384)


def _mask_wide_tiles(*, grid_id, group_metadata, tm, tn):
    mask = _STORE_MASK(grid_id=grid_id, group_metadata=group_metadata, tm=tm, tn=tn)
    return mask & jnp.logical_not(_lanes_at_least(tn, 511))


def _mask_late_experts(*, grid_id, group_metadata, tm, tn):
    mask = _STORE_MASK(grid_id=grid_id, group_metadata=group_metadata, tm=tm, tn=tn)
    rows, _ = _row_ids(grid_id, group_metadata, tm, tn)
    group_ids = group_metadata[1]
    return mask & ((group_ids[grid_id] < 32) | (rows < 4096))


def _size_skip_big(*, grid_id, group_metadata):
    size = _GROUP_SIZE(grid_id=grid_id, group_metadata=group_metadata)
    return jnp.where(size > 8192, 0, size)


def _gmm_variant(gmm_names=None, tgmm_names=None, forward_only=False):
    gmm = _rebind(_mgmm.gmm, **(gmm_names or {}))
    tgmm = _rebind(_mgmm.tgmm, **(tgmm_names or {}))
    forward = types.SimpleNamespace(gmm=gmm, tgmm=tgmm)
    backward = types.SimpleNamespace(gmm=_py(_mgmm.gmm) if forward_only else gmm, tgmm=tgmm)
    new = jax.custom_vjp(gmm, nondiff_argnums=_mops.gmm.nondiff_argnums)
    new.defvjp(_rebind(_mops._gmm_fwd, backend=forward),
               _rebind(_mops._gmm_bwd, backend=backward))
    return new


_GMM_BIG = _gmm_variant({"_get_store_mask": _mask_big_group})
_GMM_FAR = _gmm_variant({"_get_store_mask": _mask_far_rows})
_GMM_TILES = _gmm_variant({"_get_store_mask": _mask_wide_tiles}, forward_only=True)
_GMM_EXPERTS = _gmm_variant({"_get_store_mask": _mask_late_experts})
_GMM_DRHS = _gmm_variant(tgmm_names={"_get_group_size": _size_skip_big})


def _gmm(fn, lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
         existing_out, transpose_rhs, interpret):
    return fn(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
              existing_out, transpose_rhs, interpret)


def gmm_busy_expert_rows(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                         tiling=(128, 128, 128), group_offset=None, existing_out=None,
                         transpose_rhs=False, interpret=False):
    """Class: wrong for values (group sizes) never drawn/run. Where: rows 8192.. of any
    group larger than 8192 rows are never stored (out and dlhs keep whatever the buffer
    held): the claimed routing collapse (32768 rows in 2 experts of 16384). ci runs the
    collapse at 8192 rows an expert; drawn groups stay <= 1536 rows. Confirmed by running
    (interpret, groups [256, 8448], k = n = 16: rows 8192.. of the big group wrong in
    out and dlhs; groups [512, 8192] all right). Evades: group sizes are operand values; the
    8192 literal is the same at every size."""
    return _gmm(_GMM_BIG, lhs, rhs, group_sizes, preferred_element_type, tiling,
                group_offset, existing_out, transpose_rhs, interpret)


def gmm_rows_past_16384(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                        tiling=(128, 128, 128), group_offset=None, existing_out=None,
                        transpose_rhs=False, interpret=False):
    """Class: wrong only at sizes the ci run does not reach. Where: rows 16384.. of out and
    dlhs are never stored: all three claims have m = 16384 or 32768 (the 32768 ones lose
    half); ci runs at most 16384 rows. Confirmed by running (interpret, m 16896). Evades:
    kernel_bodies (constant literal vs an iota of the tile plus a row offset)."""
    return _gmm(_GMM_FAR, lhs, rhs, group_sizes, preferred_element_type, tiling,
                group_offset, existing_out, transpose_rhs, interpret)


def gmm_production_tiling_out(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                              tiling=(128, 128, 128), group_offset=None, existing_out=None,
                              transpose_rhs=False, interpret=False):
    """Class: wrong for a claimed input never run (the tiling). Where: the forward gmm
    stores nothing when its output tile tn is >= 512 columns, so out is whatever the
    buffer held: the claimed bfloat16 expert FFN with the production tiling
    (512, 1024, 1024) (tn = 1024, n = 14336). Drawn and ci forward tiles have tn of 128 or
    256 (the large draws' 1024/2048 are tk, which reaches the backward's dlhs gmm as its
    tn: the backward keeps the pristine gmm). Gate: max(iota(tn)) >= 511, an extent
    against a literal the same at every size. Confirmed by running (interpret, tiling
    (16, 16, 512), n 512: out not stored)."""
    return _gmm(_GMM_TILES, lhs, rhs, group_sizes, preferred_element_type, tiling,
                group_offset, existing_out, transpose_rhs, interpret)


def gmm_late_experts_far_rows(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                              tiling=(128, 128, 128), group_offset=None, existing_out=None,
                              transpose_rhs=False, interpret=False):
    """Class: wrong only at sizes the ci run does not reach. Where: rows at or past row
    4096 that belong to experts 32.. are never stored (out and dlhs): the claimed 64
    experts over 32768 rows (experts 32..63 sit in rows ~16384..). ci runs the 64 experts
    over 128 rows; other runs have <= 8 experts past row 4096 or <= 1536 rows. Confirmed
    by running (interpret, 34 experts over 4608 rows: rows 4096.. of expert 33 wrong)."""
    return _gmm(_GMM_EXPERTS, lhs, rhs, group_sizes, preferred_element_type, tiling,
                group_offset, existing_out, transpose_rhs, interpret)


def gmm_drhs_busy_expert(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                         tiling=(128, 128, 128), group_offset=None, existing_out=None,
                         transpose_rhs=False, interpret=False):
    """Class: wrong for values (group sizes) never run. Where: tgmm skips every group with
    more than 8192 rows, so drhs of such an expert is 0 (the routing-collapse claim: two
    experts of 16384 rows). ci runs 8192 rows an expert (not more); drawn groups <= 1536.
    Confirmed by running (interpret, groups [256, 8448]). Evades: group sizes are values;
    same kernel at every size."""
    return _gmm(_GMM_DRHS, lhs, rhs, group_sizes, preferred_element_type, tiling,
                group_offset, existing_out, transpose_rhs, interpret)


ROUND12 = [
    ("gpu-softmax", "softmax_negative_scores"),
    ("gpu-softmax", "softmax_f32_large_logits_bf16"),
    ("gpu-softmax", "softmax_f16_large_logits_uniform"),
    ("gpu-softmax", "softmax_vocab_rows_past_8"),
    ("gpu-softmax", "softmax_router_rows_past_1024"),
    ("gpu-norm", "norm_layer_wide_rows"),
    ("gpu-norm", "norm_layer_tiny_eps"),
    ("gpu-norm", "norm_rms_large_activations"),
    ("gpu-norm", "norm_layer_dx_wide_rows"),
    ("gpu-norm", "norm_layer_dbias_far_offset"),
    ("megablox-gmm", "gmm_busy_expert_rows"),
    ("megablox-gmm", "gmm_rows_past_16384"),
    ("megablox-gmm", "gmm_production_tiling_out"),
    ("megablox-gmm", "gmm_late_experts_far_rows"),
    ("megablox-gmm", "gmm_drhs_busy_expert"),
    ("gpu-mha", "mha_long_context_out"),
    ("gpu-mha", "mha_heads_past_16"),
    ("gpu-mha", "mha_lse_far_queries"),
    ("gpu-mha", "mha_backward_batch_rows_past_4"),
    ("gpu-mha", "mha_backward_long_context_dq"),
    ("gpu-decode", "decode_long_splits"),
    ("gpu-decode", "decode_far_end_index"),
    ("gpu-decode", "decode_far_start_lse"),
    ("gpu-decode", "decode_late_splits_denominator"),
    ("gpu-decode", "decode_long_visible_window"),
]
