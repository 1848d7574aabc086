"""Round 11 of the adversarial set, written independently.

Rules followed: 25 implementations, five each for gpu-softmax, gpu-norm, megablox-gmm,
gpu-mha and gpu-decode; each is wrong (or its kernel's own result is not the answer) for
inputs its family claims (``kernel-harness describe FAMILY``), and is meant to pass
``kernel-harness check FAMILY --impl tests.adversarial.impls_round11:NAME --profile ci
--max-examples 8 --no-isolate``. No harness run was made on any of them before commit;
wrongness was confirmed with small standalone scripts (CPU, interpret mode, against plain
jax.numpy) or, for sizes too large to run, by reading the traced program / the code.

Read: README.md, docs/ (not docs/adversarial.md), kernel_harness/ source (checks/,
run/, records/, core/, families/, ops/) and ``describe`` of the five families. Not read:
tests/, golden/, git history, earlier rounds.

Themes (what the reading suggested the harness does not see):

- Sizes the family claims but no ci check runs. ``claimed-sizes`` traces the claimed
  sizes and a ladder, but compares only the number of kernels and the primitives OUTSIDE
  the kernel bodies; ``wrapper_standin`` compares the wrapper with the kernels stood in
  for, and says itself that it does not see "what the kernel itself does with its
  inputs". ``large-sizes`` at ci runs capped sizes (softmax: 2 of the long rows, 2x4;
  norm: <= 300 rows; gmm: n = 128, m <= 16384; mha: one head, batch 1, <= 4352 tokens, the
  serving batch at 4 rows/16 heads; decode: no large sizes at all). So a static,
  shape-derived constant inside a kernel body (a lane count, a gain, sm_scale, causal,
  eps, normalize_output, a dropped bound), chosen per size in plain Python, changes the answer
  only where nothing runs.
- An extra Pallas "epilogue" kernel (gmm, norm): the wrapper then differs from the family's at
  the small size already, so the stand-in comparison skips it; the epilogue's constants
  are inside a kernel body.
- A kernel result dtype narrower than the requested out (gmm), at sizes past the ones
  the wrapper stand-in holds.
- Values never drawn but claimed: float32 logits above the drawn ~1e6, eps above the
  drawn 0.1 x 8^2.
- Backward-only wrongness through a custom VJP that recomputes with another eps.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu
from jax.experimental.pallas.ops.gpu import attention as _attention
from jax.experimental.pallas.ops.gpu import decode_attention as _decode
from jax.experimental.pallas.ops.gpu import layer_norm as _layer_norm
from jax.experimental.pallas.ops.gpu import rms_norm as _rms_norm
from jax.experimental.pallas.ops.tpu.megablox import ops as _megablox

# --------------------------------------------------------------------------- softmax


def _softmax_row_kernel(input_ref, probs_ref, *, block_row, live, ceiling, inner, gain):
    """jax's row kernel, with static knobs: ``live`` lanes take part (else -inf), logits
    capped at ``ceiling``, the exponentials in ``inner``, the result times ``gain``."""
    row_len = input_ref.shape[-1]
    mask = jnp.arange(block_row) < row_len
    row = plgpu.load(input_ref.at[pl.ds(0, block_row)], mask=mask, other=-float("inf"))
    row = jnp.where(jnp.arange(block_row) < live, row, -float("inf")).astype(row.dtype)
    row = jnp.minimum(row, jnp.asarray(min(ceiling, float(jnp.finfo(row.dtype).max)),
                                       row.dtype))
    row_max = jnp.max(row, axis=0)
    numerator = jnp.exp((row - row_max).astype(inner)).astype(jnp.float32)
    denominator = jnp.sum(numerator, axis=0)
    probs = numerator / denominator * gain
    plgpu.store(probs_ref.at[pl.ds(0, block_row)], probs.astype(probs_ref.dtype), mask=mask)


def _softmax(x, *, axis, interpret, live=None, ceiling=float("inf"), inner=jnp.float32,
             gain=1.0):
    axis = axis if axis >= 0 else x.ndim + axis
    if axis != x.ndim - 1:
        raise NotImplementedError("reductions along non-trailing dimension unsupported")
    row_len = x.shape[-1]
    block_row = pl.next_power_of_2(row_len)
    kernel = functools.partial(
        _softmax_row_kernel, block_row=block_row,
        live=row_len if live is None else live, ceiling=ceiling, inner=inner, gain=gain)
    f = pl.pallas_call(
        kernel, compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=1), grid=(),
        out_shape=jax.ShapeDtypeStruct((row_len,), x.dtype), interpret=interpret)
    for _ in range(x.ndim - 1):
        f = jax.vmap(f)
    return f(x)


def _rows(x):
    return math.prod(x.shape[:-1])


def softmax_many_vocab_rows(x, *, axis=-1, interpret=False):
    """Size-dependent kernel constant (wrong only at sizes not run).

    Wrong where more than 8 rows have more than 1025 logits (the claimed (64, 32000)
    float32 vocabulary, and any batch of 9+ long rows): the last logit of every row
    is left out of the softmax (probability 0, the others renormalized without it).
    Through: ci's large sizes cap those claims at 2 rows (and 2x4 for 131072), drawn rows
    are <= 1025 long; the lane count is a constant inside the kernel body, which
    claimed-sizes (primitives outside kernels) and the wrapper stand-in do not read.
    """
    n = x.shape[-1]
    live = n - 1 if (_rows(x) > 8 and n > 1025) else n
    return _softmax(x, axis=axis, interpret=interpret, live=live)


def softmax_router_token_flood(x, *, axis=-1, interpret=False):
    """Size-dependent kernel constant (wrong only at sizes not run).

    Wrong where there are more than 16384 rows (the claimed (4, 8192, 256) router scores,
    32768 rows): every probability is scaled by 0.75 (rows sum to 0.75). Through: ci runs
    the 16384-row router claim in full (not past it) and caps 4x8192 at 2x64; the gain is a
    literal inside the kernel body.
    """
    gain = 0.75 if _rows(x) > 16384 else 1.0
    return _softmax(x, axis=axis, interpret=interpret, gain=gain)


def softmax_score_ceiling(x, *, axis=-1, interpret=False):
    """Values never drawn (but claimed: logits of any finite size).

    Wrong for logits above 4e6: every logit is capped at 4e6 inside the kernel, so e.g. a
    float32 row [1e7, 1e7 - 3] comes out [0.5, 0.5] instead of [0.95, 0.05]. Through: the
    strategy's largest logits are offset 1e6 (+-6 sigma of 1, plus shifts of at most
    1000 from the shift relation) and spreads of 1e4; a cap at 4e6 touches none of them
    (float16 rounds 4e6 to inf: no cap there).
    """
    return _softmax(x, axis=axis, interpret=interpret, ceiling=4e6)


def softmax_half_vocab_sum(x, *, axis=-1, interpret=False):
    """Size-dependent kernel constant (wrong only at sizes not run).

    Wrong where more than 2 rows have more than 131072 logits (the claimed (8, 262144)
    bfloat16 vocabulary): only the first 131072 lanes are in the softmax; the rest come out
    0 and the first half is normalized alone. Through: ci runs 262144-long rows only 1..2
    rows at a time, float16's 2x4 at 131072 exactly; the lane count is inside the kernel.
    """
    n = x.shape[-1]
    live = 131072 if (_rows(x) > 2 and n > 131072) else n
    return _softmax(x, axis=axis, interpret=interpret, live=live)


def softmax_deep_batch_bf16_exp(x, *, axis=-1, interpret=False):
    """Lower precision at sizes not run.

    Wrong where x has 3+ leading axes (the contract's "0-3 leading axes") and rows longer
    than 1025: x - max is cast to bfloat16 before exp (2^-9 relative error in every
    probability of a float32 or float16 softmax, ~2e-3 against float32's 5e-6). Through:
    drawn cases with 3+ leading axes have rows <= 1025; ci's large sizes use at most 2
    leading axes; the exp dtype is inside the kernel body.
    """
    low = x.ndim >= 4 and x.shape[-1] > 1025
    return _softmax(x, axis=axis, interpret=interpret,
                    inner=jnp.bfloat16 if low else jnp.float32)


# --------------------------------------------------------------------------- epilogue


def _epilogue_kernel(x_ref, o_ref, *, gain, rows):
    x = x_ref[...].astype(jnp.float32)
    keep = jax.lax.broadcasted_iota(jnp.int32, x.shape, 0) < rows
    o_ref[...] = jnp.where(keep, x * gain, jnp.zeros_like(x)).astype(o_ref.dtype)


def _epilogue_call(x, gain, rows, interpret):
    return pl.pallas_call(
        functools.partial(_epilogue_kernel, gain=gain, rows=rows),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret)(x)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2, 3, 4))
def _epilogue(x, fwd, bwd, rows, interpret):
    """A Pallas copy of x times ``fwd`` (rows past ``rows`` zeroed); its VJP a Pallas
    copy of the cotangent times ``bwd`` (same rows)."""
    return _epilogue_call(x, fwd, rows, interpret)


def _epilogue_fwd(x, fwd, bwd, rows, interpret):
    return _epilogue_call(x, fwd, rows, interpret), None


def _epilogue_bwd(fwd, bwd, rows, interpret, _, g):
    return (_epilogue_call(g, bwd, rows, interpret),)


_epilogue.defvjp(_epilogue_fwd, _epilogue_bwd)


# --------------------------------------------------------------------------- norm


def _norm(op, x, weight, bias, *, eps, interpret):
    fn = {"layer_norm": _layer_norm.layer_norm, "rms_norm": _rms_norm.rms_norm}.get(op)
    if fn is None:
        raise ValueError(f"unknown op {op!r}")
    return fn(x, weight, bias, eps=eps, backward_pass_impl="triton", interpret=interpret)


def norm_many_tokens_tail_rows(op, x, weight, bias, *, eps, interpret=False):
    """Size-dependent row limit in an epilogue kernel (wrong only at sizes not run).

    The pristine kernel's out goes through a second Pallas kernel (a copy, rows past a
    limit zeroed; its VJP the same copy of the cotangent). The limit is all rows, except
    where x has more than 1024 rows (the claimed 1x4096 and 2x1024 token batches): rows
    from 1024 on come out 0 (and their dx 0, their part of dweight/dbias missing).
    Through: drawn cases have <= 99 rows and ci's large sizes cap rows at 300; the extra
    kernel is there at every size (claimed-sizes compares counts across sizes) and makes
    the wrapper differ from the family's at the small size, so the stand-in comparison is
    skipped; the limit is a literal inside the epilogue's body.
    """
    a, b, n = x.shape
    rows = 1024 if a * b > 1024 else a * b
    out = _norm(op, x, weight, bias, eps=eps, interpret=interpret)
    return _epilogue(out.reshape(a * b, n), 1.0, 1.0, rows, interpret).reshape(a, b, n)


def norm_two_batches_eps(op, x, weight, bias, *, eps, interpret=False):
    """Size-dependent kernel constant (wrong only at sizes not run).

    Wrong where a >= 2 and rows are longer than 10240 (the claimed (2, 1024, 16384)
    float32): eps + 1.0 is used (out of a unit-variance row off by ~30%). Through: drawn
    rows are <= 10240 long (the contract's "n > 10240 not covered"), ci's large float32
    sizes have a = 1; eps is a constant in the kernel bodies.
    """
    if x.shape[0] >= 2 and x.shape[-1] > 10240:
        eps = eps + 1.0
    return _norm(op, x, weight, bias, eps=eps, interpret=interpret)


def norm_bf16_hidden_eps(op, x, weight, bias, *, eps, interpret=False):
    """Size- and dtype-dependent kernel constant (wrong only at sizes not run).

    Wrong for bfloat16 x with rows longer than 1024 and more than 99 rows (the claimed
    (1, 4096, 8192) bfloat16): eps + 0.25 is used (a unit-variance row's out ~11% small).
    Through: drawn cases have <= 99 rows, ci's bfloat16 large sizes cap n at 1024.
    """
    if x.dtype == jnp.bfloat16 and x.shape[-1] > 1024 and x.shape[0] * x.shape[1] > 99:
        eps = eps + 0.25
    return _norm(op, x, weight, bias, eps=eps, interpret=interpret)


def norm_eps_cap(op, x, weight, bias, *, eps, interpret=False):
    """Values never drawn (but claimed: eps is any positive float).

    Wrong for eps > 8: eps is capped at 8 (eps = 100 on a unit-variance row gives out
    3.3x too large). Through: eps is drawn from 1e-12..0.1 and the scale relation
    multiplies it by at most 8^2 = 64 (6.4 < 8).
    """
    return _norm(op, x, weight, bias, eps=min(eps, 8.0), interpret=interpret)


def norm_backward_recompute(op, x, weight, bias, *, eps, interpret=False):
    """Backward-only wrongness at sizes not run (custom VJP).

    The forward (out and out_vjp) is the pristine kernel; the backward recomputes the
    pristine forward under jax.vjp and runs its Triton backward kernels, but where x has
    at least 1024 rows (the claimed 4096- and 2048-token batches) it recomputes with
    eps + 1.0: dx and dweight are wrong there (dbias, the column sum of the
    cotangent, stays right).
    Through: drawn rows <= 99, ci's large rows <= 300; the extra forward kernel in the
    backward is there at every size (claimed-sizes compares counts across sizes), eps is
    inside the kernel bodies.
    """
    eps_bwd = eps + 1.0 if x.shape[0] * x.shape[1] >= 1024 else eps

    @jax.custom_vjp
    def f(x, weight, bias):
        return _norm(op, x, weight, bias, eps=eps, interpret=interpret)

    def f_fwd(x, weight, bias):
        return f(x, weight, bias), (x, weight, bias)

    def f_bwd(res, g):
        _, vjp = jax.vjp(
            lambda a, w, b: _norm(op, a, w, b, eps=eps_bwd, interpret=interpret), *res)
        return vjp(g)

    f.defvjp(f_fwd, f_bwd)
    return f(x, weight, bias)


# --------------------------------------------------------------------------- megablox gmm


def _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
         existing_out, transpose_rhs, interpret):
    return _megablox.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling,
                         group_offset, existing_out, transpose_rhs, interpret)


def _gmm_dims(lhs, rhs, transpose_rhs):
    m, k = lhs.shape
    n = rhs.shape[1] if transpose_rhs else rhs.shape[2]
    return m, k, n


def gmm_wide_out_gain(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                      tiling=(128, 128, 128), group_offset=None, existing_out=None,
                      transpose_rhs=False, interpret=False):
    """Size-dependent constant in an epilogue kernel (wrong only at sizes not run).

    Wrong where n >= 1024 (the claimed 14336- and 4096-wide outputs): out, dlhs and drhs
    are halved (the epilogue's forward and backward gain 0.5). Through: drawn n is 128 or
    256, ci's large sizes use n = 128 (nightly <= 512); the epilogue kernel makes the
    wrapper differ from the family's at the small size, so the stand-in comparison is
    skipped, and its gain is a literal inside a kernel body.
    """
    _, _, n = _gmm_dims(lhs, rhs, transpose_rhs)
    gain = 0.5 if n >= 1024 else 1.0
    out = _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
               existing_out, transpose_rhs, interpret)
    return _epilogue(out, gain, gain, out.shape[0], interpret)


def gmm_token_flood_rows(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                         tiling=(128, 128, 128), group_offset=None, existing_out=None,
                         transpose_rhs=False, interpret=False):
    """Size-dependent row limit in an epilogue kernel (wrong only at sizes not run).

    Wrong where m > 16384 (the claimed 32768 routed rows): out rows from 16384 on are 0,
    and so are dlhs there and those rows' part of drhs. Through: drawn m <= 1536, ci's
    routing collapse runs m up to 16384 exactly (its cap); the row limit is a literal in
    the epilogue kernel body.
    """
    m = lhs.shape[0]
    rows = 16384 if m > 16384 else m
    out = _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
               existing_out, transpose_rhs, interpret)
    return _epilogue(out, 1.0, 1.0, rows, interpret)


def gmm_deep_k_backward(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                        tiling=(128, 128, 128), group_offset=None, existing_out=None,
                        transpose_rhs=False, interpret=False):
    """Backward-only size-dependent constant (wrong only at sizes not run).

    Wrong where k > 4096 (the claimed float32 contraction of 6144): out is right, but
    the cotangent reaching megablox's dlhs/drhs kernels is scaled by 1.5 (dlhs and drhs
    50% too large). Through: drawn k <= 384, ci's float32 large sizes cap k at 4096; the
    gain is inside the epilogue's backward kernel.
    """
    _, k, _ = _gmm_dims(lhs, rhs, transpose_rhs)
    bwd = 1.5 if k > 4096 else 1.0
    out = _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
               existing_out, transpose_rhs, interpret)
    return _epilogue(out, 1.0, bwd, out.shape[0], interpret)


def gmm_many_experts_busy(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                          tiling=(128, 128, 128), group_offset=None, existing_out=None,
                          transpose_rhs=False, interpret=False):
    """Size-dependent constant in an epilogue kernel (wrong only at sizes not run).

    Wrong where there are more than 32 groups and m > 128 (the claimed 64 experts over
    32768 rows): out is scaled by 1 - 2^-5 (3% off; forward only). Through: drawn cases
    have at most 16 groups (the empty-group and group-split relations add one or two),
    ci's 64-expert case runs m = 128 only.
    """
    gain = 1.0 - 2.0 ** -5 if (group_sizes.shape[0] > 32 and lhs.shape[0] > 128) else 1.0
    out = _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
               existing_out, transpose_rhs, interpret)
    return _epilogue(out, gain, 1.0, out.shape[0], interpret)


def gmm_bf16_wide_narrow_store(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                               tiling=(128, 128, 128), group_offset=None, existing_out=None,
                               transpose_rhs=False, interpret=False):
    """Lower precision at sizes not run (kernel result dtype).

    Wrong for bfloat16 operands with n > 256, m >= 16384 and a float32 out requested (the
    claimed 64-expert bfloat16 up projection, 32768 x 4096 x 14336): the kernel is asked
    for bfloat16 and its result widened, so out carries a bfloat16 rounding (2^-9
    relative; the family's calibrated bound says storing a float32 out as bfloat16
    fails). Through: drawn and ci
    n <= 256 / = 128 (bfloat16 m = 128 there); the narrowing happens inside the kernel (its
    out dtype), outside only a widening cast (layout). The wrapper stand-in would see the
    widened pattern, but its sizes stop at m = 8192 (the stand-in sizes, and the largest
    ladder rung under 2^26 elements), below the m >= 16384 condition. A custom VJP (at every
    size, so the kernel count does not change with size) differentiates the exact
    float32 gmm, so no bfloat16 cotangent reaches the backward kernels' inputs either.
    """
    _, _, n = _gmm_dims(lhs, rhs, transpose_rhs)
    want = jnp.dtype(preferred_element_type)
    narrow = (lhs.dtype == jnp.bfloat16 and rhs.dtype == jnp.bfloat16 and n > 256
              and lhs.shape[0] >= 16384 and want == jnp.float32)
    store = jnp.bfloat16 if narrow else want

    def exact(a, b):
        return _gmm(a, b, group_sizes, want, tiling, group_offset, existing_out,
                    transpose_rhs, interpret)

    @jax.custom_vjp
    def f(a, b):
        return _gmm(a, b, group_sizes, store, tiling, group_offset, existing_out,
                    transpose_rhs, interpret).astype(want)

    def f_fwd(a, b):
        return f(a, b), (a, b)

    def f_bwd(res, g):
        return jax.vjp(exact, *res)[1](g)

    f.defvjp(f_fwd, f_bwd)
    return f(lhs, rhs)


# --------------------------------------------------------------------------- mha


def _mha(q, k, v, segment_ids, **kwargs):
    return _attention.mha(q, k, v, segment_ids, **kwargs)


def mha_long_context_scale(q, k, v, segment_ids, *, sm_scale=1.0, causal=False,
                           block_sizes=None, num_warps=None, num_stages=2,
                           interpret=False, return_residuals=False):
    """Size-dependent kernel constant (wrong only at sizes not run).

    Wrong where kv_len > 4352 (every claimed context: 16k-64k tokens): sm_scale x 1.25
    in the forward and backward kernels (out, lse, dq, dk, dv all wrong). Through: drawn
    lengths are small, ci's large sizes cap the contexts at 4352 tokens; sm_scale is a
    constant in the kernel bodies.
    """
    if k.shape[1] > 4352:
        sm_scale = sm_scale * 1.25
    return _mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                block_sizes=block_sizes, num_warps=num_warps, num_stages=num_stages,
                interpret=interpret, return_residuals=return_residuals)


def mha_long_causal_unmasked(q, k, v, segment_ids, *, sm_scale=1.0, causal=False,
                             block_sizes=None, num_warps=None, num_stages=2,
                             interpret=False, return_residuals=False):
    """Size-dependent kernel flag (wrong only at sizes not run).

    Wrong for causal attention with q_len > 8192 (the claimed 32k bfloat16 and 16k float16
    causal contexts): the causal mask is dropped (queries see future keys). Through: ci
    caps contexts at 4352 tokens; ``causal`` is a static flag of the kernel bodies (the
    kernel count and the primitives outside them are the same either way).
    """
    if causal and q.shape[1] > 8192:
        causal = False
    return _mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                block_sizes=block_sizes, num_warps=num_warps, num_stages=num_stages,
                interpret=interpret, return_residuals=return_residuals)


def mha_many_heads_masked(q, k, v, segment_ids, *, sm_scale=1.0, causal=False,
                          block_sizes=None, num_warps=None, num_stages=2,
                          interpret=False, return_residuals=False):
    """Size-dependent kernel flag (wrong only at sizes not run).

    Wrong where there are more than 16 heads (the claimed serving batch, 32 heads): the
    causal flag is inverted (a full-attention batch gets a causal mask). Through: drawn
    heads are few, ci's serving-batch large size runs 16 of the 32 heads.
    """
    if q.shape[2] > 16:
        causal = not causal
    return _mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                block_sizes=block_sizes, num_warps=num_warps, num_stages=num_stages,
                interpret=interpret, return_residuals=return_residuals)


def mha_serving_batch_scale(q, k, v, segment_ids, *, sm_scale=1.0, causal=False,
                            block_sizes=None, num_warps=None, num_stages=2,
                            interpret=False, return_residuals=False):
    """Size-dependent kernel constant (wrong only at sizes not run).

    Wrong where batch > 4 (the claimed serving batch of 8 rows): sm_scale halved.
    Through: drawn batches are small, ci's serving batch runs 4 of its 8 rows.
    """
    if q.shape[0] > 4:
        sm_scale = sm_scale * 0.5
    return _mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                block_sizes=block_sizes, num_warps=num_warps, num_stages=num_stages,
                interpret=interpret, return_residuals=return_residuals)


def mha_long_cross_attention(q, k, v, segment_ids, *, sm_scale=1.0, causal=False,
                             block_sizes=None, num_warps=None, num_stages=2,
                             interpret=False, return_residuals=False):
    """Size-dependent kernel flag (wrong only at sizes not run).

    Wrong for q_len != kv_len (claimed: q-len-ne-kv-len) with kv_len > 4352: the causal
    flag is inverted. Through: drawn lengths are small; ci's large sizes all have
    q_len == kv_len (and <= 4352); claimed-sizes traces q_len == kv_len only.
    """
    if q.shape[1] != k.shape[1] and k.shape[1] > 4352:
        causal = not causal
    return _mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                block_sizes=block_sizes, num_warps=num_warps, num_stages=num_stages,
                interpret=interpret, return_residuals=return_residuals)


# --------------------------------------------------------------------------- decode


def _decode_call(q, k, v, start_idx, kv_seq_len, entry, **kwargs):
    if entry == "gqa":
        return _decode.gqa(q, k, v, start_idx, kv_seq_len, **kwargs)
    if entry == "mqa":
        if k.shape[2] != 1:
            raise ValueError(f"entry 'mqa' needs one kv head, got k of shape {k.shape}")
        return _decode.mqa(q, k[:, :, 0], v[:, :, 0], start_idx, kv_seq_len, **kwargs)
    raise ValueError(f"unknown entry {entry!r}; use 'gqa' or 'mqa'")


def decode_long_cache_scale(q, k, v, start_idx, kv_seq_len, *, entry="gqa", **kwargs):
    """Size-dependent kernel constant (wrong only at sizes not run).

    Wrong where the cache holds more than 4096 keys (both claimed sizes: 131072 and
    32768): sm_scale x 1.25 (out and lse wrong). Through: gpu-decode runs no large sizes
    at all, drawn caches are <= 1024 keys; sm_scale is a constant in the kernel body.
    """
    if k.shape[1] > 4096:
        scale = kwargs.get("sm_scale")
        kwargs["sm_scale"] = (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale) * 1.25
    return _decode_call(q, k, v, start_idx, kv_seq_len, entry, **kwargs)


def decode_big_batch_scale(q, k, v, start_idx, kv_seq_len, *, entry="gqa", **kwargs):
    """Size-dependent kernel constant (wrong only at sizes not run).

    Wrong where batch >= 8 (both claimed sizes: batch 8 and 32): sm_scale x 0.75. Through:
    drawn batches are 1-4, and no large size runs.
    """
    if q.shape[0] >= 8:
        scale = kwargs.get("sm_scale")
        kwargs["sm_scale"] = (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale) * 0.75
    return _decode_call(q, k, v, start_idx, kv_seq_len, entry, **kwargs)


def decode_long_cache_unnormalized(q, k, v, start_idx, kv_seq_len, *, entry="gqa",
                                   **kwargs):
    """Size-dependent option (wrong only at sizes not run).

    Wrong where the cache holds more than 4096 keys: ``normalize_output`` is inverted
    (a normalized request comes back as sum_j exp(s_j - m) v_j, an unnormalized one
    divided by l). Through: no large size runs; claimed-sizes flags only primitives that
    appear at a claimed size and not at the small one (dropping the combine's division
    adds none).
    """
    if k.shape[1] > 4096:
        kwargs["normalize_output"] = not kwargs.get("normalize_output", True)
    return _decode_call(q, k, v, start_idx, kv_seq_len, entry, **kwargs)


def decode_long_cache_no_end(q, k, v, start_idx, kv_seq_len, *, entry="gqa", **kwargs):
    """Size-dependent dropped operand (wrong only at sizes not run).

    Wrong where the cache holds more than 4096 keys and kv_seq_len is given (ragged
    rows: the claimed sizes pass both bounds): the end bound is dropped, so every row
    attends to the whole cache past its end. Through: no large size runs; the claimed
    sizes (over 2^26 elements) are too large for the stand-in comparison and decode has
    no ladder of smaller rungs to compare instead.
    """
    if k.shape[1] > 4096:
        kv_seq_len = None
    return _decode_call(q, k, v, start_idx, kv_seq_len, entry, **kwargs)


def decode_wide_heads_scale(q, k, v, start_idx, kv_seq_len, *, entry="gqa", **kwargs):
    """Size-dependent kernel constant (wrong only at sizes not run).

    Wrong for head_dim >= 128 with more than 1024 cached keys (the claimed bfloat16 size,
    8 x 131072 x 8 kv heads of 128): sm_scale x 2. Through: drawn head_dims go up to 128
    but caches only up to 1024 keys; no large size runs.
    """
    if q.shape[-1] >= 128 and k.shape[1] > 1024:
        scale = kwargs.get("sm_scale")
        kwargs["sm_scale"] = (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale) * 2.0
    return _decode_call(q, k, v, start_idx, kv_seq_len, entry, **kwargs)


ROUND11 = [
    ("gpu-softmax", "softmax_many_vocab_rows"),
    ("gpu-softmax", "softmax_router_token_flood"),
    ("gpu-softmax", "softmax_score_ceiling"),
    ("gpu-softmax", "softmax_half_vocab_sum"),
    ("gpu-softmax", "softmax_deep_batch_bf16_exp"),
    ("gpu-norm", "norm_many_tokens_tail_rows"),
    ("gpu-norm", "norm_two_batches_eps"),
    ("gpu-norm", "norm_bf16_hidden_eps"),
    ("gpu-norm", "norm_eps_cap"),
    ("gpu-norm", "norm_backward_recompute"),
    ("megablox-gmm", "gmm_wide_out_gain"),
    ("megablox-gmm", "gmm_token_flood_rows"),
    ("megablox-gmm", "gmm_deep_k_backward"),
    ("megablox-gmm", "gmm_many_experts_busy"),
    ("megablox-gmm", "gmm_bf16_wide_narrow_store"),
    ("gpu-mha", "mha_long_context_scale"),
    ("gpu-mha", "mha_long_causal_unmasked"),
    ("gpu-mha", "mha_many_heads_masked"),
    ("gpu-mha", "mha_serving_batch_scale"),
    ("gpu-mha", "mha_long_cross_attention"),
    ("gpu-decode", "decode_long_cache_scale"),
    ("gpu-decode", "decode_big_batch_scale"),
    ("gpu-decode", "decode_long_cache_unnormalized"),
    ("gpu-decode", "decode_long_cache_no_end"),
    ("gpu-decode", "decode_wide_heads_scale"),
]
