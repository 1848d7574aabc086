"""Round 14 of the adversarial set: 25 implementations, five per family (gpu-softmax,
gpu-norm, megablox-gmm, gpu-mha, gpu-decode), each wrong on an input the family's contract
allows and built to pass ``kernel-harness check FAMILY --impl
tests.adversarial.impls_round14:NAME --profile ci``. Written independently of the harness's
tests: each docstring says the class of cheat, where it is wrong and which defences it
expects to get through.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu
from jax.experimental.pallas.ops.gpu import attention as _attention
from jax.experimental.pallas.ops.gpu import decode_attention as _decode_op
from jax.experimental.pallas.ops.gpu import layer_norm as _layer_norm
from jax.experimental.pallas.ops.gpu import rms_norm as _rms_norm
from jax.experimental.pallas.ops.gpu import softmax as _softmax_op
from jax.experimental.pallas.ops.tpu.megablox import ops as _gmm_ops

# --------------------------------------------------------------------------------------
# gpu-softmax
# --------------------------------------------------------------------------------------

#: The longest row any claimed size holds (8 x 262144 bfloat16 logits).
_LONGEST_ROW = 262144
#: The longest float32 row claimed (64 x 32000); float16's (2 x 4 x 131072).
_F32_ROW, _F16_ROW = 32000, 131072
#: The most rows on one inner leading axis any claimed size holds, with margin.
_INNER_ROWS = 16384


def softmax_axis_spelling(x, *, axis=-1, interpret=False):
    """Class: option spelling never drawn (an argument value the harness never passes).
    Wrong: whenever ``axis`` is given as the non-negative index of the last axis
    (``axis=x.ndim - 1``, e.g. ``axis=1`` for a 2-D x: the same softmax the contract
    defines): the logits are reversed along the row for the kernel and never reversed
    back, so each row's probabilities come back mirrored (wrong by up to the row's largest
    probability on every row that is not a palindrome).
    Gets through: every harness call (matches-reference, large sizes, claimed sizes,
    stand-in, aimed cases, eager rerun) passes ``axis=-1``, which takes the family's own
    kernel untouched: kernels, counts, poisoning, core values, bodies and bits are jax's.
    The branch reads a Python int, not the data, not ``interpret``.
    """
    if axis >= 0 and axis == x.ndim - 1:
        return _softmax_op.softmax(x[..., ::-1], axis=-1, interpret=interpret)
    return _softmax_op.softmax(x, axis=axis, interpret=interpret)


def softmax_chunked_vocab(x, *, axis=-1, interpret=False):
    """Class: wrong only at sizes never run or traced (row length past every claim).
    Wrong: rows longer than 262144 logits (a 300k vocabulary, any dtype): each half of the
    row is normalised on its own and scaled by 1/2, so the probabilities are off wherever
    the two halves hold unequal mass: a row dominated by one logit (30 above O(1) others)
    gets 0.5 there instead of 1.0 (an error of half the largest probability); O(1)
    random rows of 262146 logits with one logit at 8 err by 6e-3 of the largest
    probability, against the tolerances of 5e-6 (float32) to 1e-2 (bfloat16).
    Gets through: the drawn rows stop at 1025, the large sizes at 262144 (the claimed
    vocabulary), the ladders climb only to the claimed sizes: no traced or run size takes
    the branch, so every program the harness builds is jax's kernel alone.
    """
    n = x.shape[-1]
    if n > _LONGEST_ROW:
        h = n // 2
        lo = _softmax_op.softmax(x[..., :h], axis=-1, interpret=interpret)
        hi = _softmax_op.softmax(x[..., h:], axis=-1, interpret=interpret)
        return (jnp.concatenate([lo, hi], axis=-1) * 0.5).astype(x.dtype)
    return _softmax_op.softmax(x, axis=axis, interpret=interpret)


def softmax_f32_vocab_bf16(x, *, axis=-1, interpret=False):
    """Class: lower precision on a dtype x size pair never run (float32 past its claim).
    Wrong: float32 rows longer than 32000 logits (e.g. a 50257 or 128k float32 vocabulary)
    are computed by the kernel in bfloat16 (logits rounded to 2^-9 of their size,
    probabilities stored in bfloat16): relative errors of ~1e-2 on O(1) logits against the
    float32 tolerance of 5e-6.
    Gets through: float32 rows are drawn up to 1025 and run at large sizes up to the
    claimed 32000 (the longer large rows are bfloat16 and float16, which take the plain
    path); the claimed sizes and ladders never trace a float32 row past 32000.
    """
    if x.dtype == jnp.float32 and x.shape[-1] > _F32_ROW:
        low = _softmax_op.softmax(x.astype(jnp.bfloat16), axis=-1, interpret=interpret)
        return low.astype(x.dtype)
    return _softmax_op.softmax(x, axis=axis, interpret=interpret)


def _dropped_tail_kernel(input_ref, probs_ref, *, block_row: int, seen: int):
    """jax's softmax row kernel, loading only the first ``seen`` logits of the row."""
    row_len = input_ref.shape[-1]
    loaded = jnp.arange(block_row) < seen
    row = plgpu.load(input_ref.at[pl.ds(0, block_row)], mask=loaded, other=-float("inf"))
    row_max = jnp.max(row, axis=0)
    numerator = jnp.exp((row - row_max).astype(jnp.float32))
    denominator = jnp.sum(numerator, axis=0)
    plgpu.store(probs_ref.at[pl.ds(0, block_row)],
                (numerator / denominator).astype(probs_ref.dtype),
                mask=jnp.arange(block_row) < row_len)


def _tail_softmax(x, interpret):
    n = x.shape[-1]
    block_row = pl.next_power_of_2(n)
    f = pl.pallas_call(
        functools.partial(_dropped_tail_kernel, block_row=block_row, seen=n - 1),
        compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=1),
        grid=(), out_shape=jax.ShapeDtypeStruct((n,), x.dtype), interpret=interpret)
    for _ in range(x.ndim - 1):
        f = jax.vmap(f)
    return f(x)


def softmax_f16_tail_mask(x, *, axis=-1, interpret=False):
    """Class: in-kernel off-by-one mask at sizes never run (float16 past its claim).
    Wrong: float16 rows longer than 131072 logits: a Pallas kernel of our own (jax's row
    kernel with its load mask one lane short: ``iota < n - 1``) never reads the row's last
    logit, so that probability is exactly 0 and the rest are renormalised without it
    (wrong by the whole probability of the last logit: ~1.0 when it is the row's max).
    Gets through: float16 is drawn up to 1025 logits and run at large sizes up to the
    claimed 131072; nothing traces float16 past it, so the own kernel is never built by the
    harness (and its mask bound, n - 1, is an extent give or take one anyway).
    """
    if x.dtype == jnp.float16 and x.shape[-1] > _F16_ROW and axis in (-1, x.ndim - 1):
        return _tail_softmax(x, interpret)
    return _softmax_op.softmax(x, axis=axis, interpret=interpret)


def softmax_rows_rolled(x, *, axis=-1, interpret=False):
    """Class: layout bug at shapes never run (an inner leading axis past every claim).
    Wrong: inputs of 2+ leading axes whose last leading axis has more than 16384 rows
    (e.g. x of (2, 20000, 256): a long prefill's router scores per batch row): the rows of
    the result are rolled by one along that axis, so row i gets row i-1's probabilities
    (wrong by up to 1.0 wherever neighbouring rows differ).
    Gets through: the drawn leading axes are small, the large sizes stop at 4 x 64 (ci) or
    4 x 512 rows (nightly), the claimed (4, 8192, 256) and its ladder stay at or under
    8192 inner rows; the roll is never traced, so the stand-in comparison and the bodies
    see jax's kernel alone.
    """
    out = _softmax_op.softmax(x, axis=axis, interpret=interpret)
    if x.ndim >= 3 and x.shape[-2] > _INNER_ROWS:
        out = jnp.roll(out, 1, axis=-2)
    return out


# --------------------------------------------------------------------------------------
# gpu-norm
# --------------------------------------------------------------------------------------

#: The widest row any claimed size holds (2 x 1024 x 16384 float32).
_WIDEST_NORM = 16384
#: Rows past every claimed size (1 x 4096 and 2 x 1024) and every drawn one, with margin.
_MANY_NORM_ROWS = 8192
#: The longest row drawn (the large float16 rows are never run: only bfloat16 and float32).
_DRAWN_NORM_ROW = 5000


def _norm_call(op, x, weight, bias, eps, interpret, backward_pass_impl="triton"):
    fn = _layer_norm.layer_norm if op == "layer_norm" else _rms_norm.rms_norm
    if op not in ("layer_norm", "rms_norm"):
        raise ValueError(f"unknown op {op!r}")
    return fn(x, weight, bias, eps=eps, backward_pass_impl=backward_pass_impl,
              interpret=interpret)


def norm_eps_zero_default(op, x, weight, bias, *, eps, interpret):
    """Class: falsy option replaced by a default (an option value never drawn).
    Wrong: ``eps=0.0`` (a norm without a stabiliser: valid for every row with a non-zero
    spread) is replaced by 1e-5 through ``eps or 1e-5``: rows whose variance is not large
    against 1e-5 come out shrunk (spread 1e-3: out is 1/sqrt(11) ~ 0.3 of the right
    normalised value, dx likewise), for both ops.
    Gets through: eps is drawn from 1e-12 to 100, never 0 (the draws and the aimed cases:
    the Python ``or`` leaves no literal in the traced program), so every call is jax's
    kernel with the case's eps, unchanged.
    """
    return _norm_call(op, x, weight, bias, eps or 1e-5, interpret)


def norm_wide_split(op, x, weight, bias, *, eps, interpret):
    """Class: wrong only at sizes never run or traced (row length past every claim).
    Wrong: even row lengths past 16384 (n = 32768, 20480: wide models' hidden sizes):
    each half of the row is normalised with its own mean and variance (two kernel calls
    on the halves), so out, dx, dweight and dbias are wrong wherever the halves' statistics
    differ (for layer_norm a row whose halves have different means: errors of the order of
    the normalised values themselves).
    Gets through: drawn rows stop at 5000, the large float32 rows at the claimed 16384,
    ladders climb to the claimed sizes; the split is never traced.
    """
    n = x.shape[-1]
    if n > _WIDEST_NORM and n % 2 == 0:
        h = n // 2
        lo = _norm_call(op, x[..., :h], weight[:h], bias[:h], eps, interpret)
        hi = _norm_call(op, x[..., h:], weight[h:], bias[h:], eps, interpret)
        return jnp.concatenate([lo, hi], axis=-1)
    return _norm_call(op, x, weight, bias, eps, interpret)


def norm_many_rows_xla_backward(op, x, weight, bias, *, eps, interpret):
    """Class: gradient wrong only at sizes never run (rows past every claim), by falling
    back to jax's own reference backward.
    Wrong: layer_norm calls with more than 8192 rows (a x b, e.g. (1, 16384, 128) or
    (4, 4096, 1024)) differentiate the kernel module's ``layer_norm_reference``
    (``backward_pass_impl='xla'``), whose one-pass variance E[x^2] - mean^2 cancels: on
    float32 rows offset 300 spreads from 0 (a case the contract draws), dx and dweight
    err by ~1e-2 relative against tolerances of 6e-5 and 1.5e-4. The forward is right.
    Gets through: drawn rows stop at 99, large sizes at 300 rows, the claimed sizes hold
    4096 and 2048 rows and their ladders fewer, so the XLA backward is never traced (no
    math outside the kernels, the backward kernels counted as usual).
    """
    rows = x.shape[0] * x.shape[1]
    impl = "xla" if (rows > _MANY_NORM_ROWS and op == "layer_norm") else "triton"
    return _norm_call(op, x, weight, bias, eps, interpret, backward_pass_impl=impl)


def norm_f16_wide_dbias(op, x, weight, bias, *, eps, interpret):
    """Class: gradient wrong on a dtype x size pair never run (float16 past the drawn rows).
    Wrong: float16 rows longer than 5000 (e.g. n = 8192, 6144): the bias enters through
    ``stop_gradient``, so dbias is exactly 0 instead of the column sums of the cotangent
    (wrong by 100% of dbias); out, dx and dweight are right.
    Gets through: float16 rows are drawn only up to 5000 columns; the large sizes and the
    claimed sizes (with their ladders) are bfloat16 and float32 only, so the branch is
    never run or traced.
    """
    if x.dtype == jnp.float16 and x.shape[-1] > _DRAWN_NORM_ROW:
        bias = jax.lax.stop_gradient(bias)
    return _norm_call(op, x, weight, bias, eps, interpret)


def norm_batch_axes_swapped(op, x, weight, bias, *, eps, interpret):
    """Class: layout bug at shapes never run (a first leading axis past the drawn ones).
    Wrong: x of shape [a, b, n] with a > 8 and b > 1 (e.g. (16, 2, 128): 16 sequences of
    2 tokens): the rows are normalised in [b, a, n] order and reshaped straight back to
    [a, b, n] instead of transposed back, so row (i, j) receives another row's output
    (wrong by the size of the outputs themselves), and the gradients are permuted too.
    Gets through: the drawn leading shapes have a <= 5, the large sizes a = 1, the claimed
    sizes a <= 2 (ladders too): the transposes are never traced.
    """
    a, b, n = x.shape
    if a > 8 and b > 1:
        y = _norm_call(op, jnp.swapaxes(x, 0, 1), weight, bias, eps, interpret)
        return y.reshape(a, b, n)
    return _norm_call(op, x, weight, bias, eps, interpret)


# --------------------------------------------------------------------------------------
# megablox-gmm
# --------------------------------------------------------------------------------------

#: The most experts, rows and output columns any claimed size holds.
_MOST_EXPERTS, _MOST_ROWS, _MOST_COLS = 64, 32768, 14336
#: The tallest row tile used anywhere (claimed tiling (512, 1024, 1024), large tiles).
_TALLEST_TM = 512


def _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
         existing_out, transpose_rhs, interpret):
    return _gmm_ops.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling,
                        group_offset, existing_out, transpose_rhs, interpret)


def gmm_drops_existing_out(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                           tiling=(128, 128, 128), group_offset=None, existing_out=None,
                           transpose_rhs=False, interpret=False):
    """Class: argument ignored that the harness always passes as None (result unused).
    Wrong: any call with an ``existing_out``: it is dropped, so the rows no local group
    covers (rows past the groups' sum, or another shard's rows under ``group_offset``)
    are never written (NaN in interpret mode, garbage on a device) instead of holding
    ``existing_out``'s values (wrong by all of them).
    Gets through: every harness call (drawn, large, claimed, stand-in) passes
    ``existing_out=None``, where this is megablox's gmm unchanged.
    """
    del existing_out
    return _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset, None,
                transpose_rhs, interpret)


def gmm_many_experts(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                     tiling=(128, 128, 128), group_offset=None, existing_out=None,
                     transpose_rhs=False, interpret=False):
    """Class: wrong only at sizes never run or traced (expert count past every claim).
    Wrong: more than 64 experts in the rhs (128-expert MoE layers) without a shard
    offset: the experts past the 64th are folded into expert 63 (their rows multiplied by
    expert 63's weights): the rows of groups 64.. are wrong by the size of the output
    (unless those experts' weights happen to equal expert 63's).
    Gets through: drawn groups stop at 16, large sizes and the claimed MoE layer at 64
    experts (ladders fewer): the fold is never traced, the program is megablox's.
    """
    if rhs.shape[0] > _MOST_EXPERTS and group_offset is None and \
            group_sizes.shape[0] == rhs.shape[0]:
        head = group_sizes[:_MOST_EXPERTS - 1]
        tail = jnp.sum(group_sizes[_MOST_EXPERTS - 1:], keepdims=True).astype(head.dtype)
        return _gmm(lhs, rhs[:_MOST_EXPERTS], jnp.concatenate([head, tail]),
                    preferred_element_type, tiling, None, existing_out, transpose_rhs,
                    interpret)
    return _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                existing_out, transpose_rhs, interpret)


def gmm_tall_tiles(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                   tiling=(128, 128, 128), group_offset=None, existing_out=None,
                   transpose_rhs=False, interpret=False):
    """Class: option value never drawn (a row tile taller than any used).
    Wrong: a tiling whose row tile ``tm`` is above 512 (e.g. (1024, 128, 128) on 1024+
    rows): the last group's size is passed as 0, so its rows are never written (whatever
    the output buffer held: NaN in interpret mode, or ``existing_out``) instead of their
    products: wrong on every row of the last group whenever it is not empty.
    Gets through: drawn tiles have tm of 8-128, the large sizes 128/256/512, the claimed
    sizes 512 and 128, so the changed sizes are never handed to the kernel (the stand-in
    comparison sees the same group sizes).
    """
    if tiling[0] > _TALLEST_TM:
        group_sizes = group_sizes.at[-1].set(0)
    return _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                existing_out, transpose_rhs, interpret)


def gmm_wide_out(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                 tiling=(128, 128, 128), group_offset=None, existing_out=None,
                 transpose_rhs=False, interpret=False):
    """Class: wrong only at sizes never run or traced (output columns past every claim).
    Wrong: rhs with more than 14336 output columns (e.g. a 16384- or 28672-wide expert
    up projection): only the first 14336 columns are computed, the rest of out is 0
    (wrong by 100% there; drhs is 0 there too).
    Gets through: drawn n stops at 384, large sizes at 512, the claimed layer at 14336
    (the stand-in size (256, 512, 14336) too): the slice is never traced.
    """
    n = rhs.shape[1] if transpose_rhs else rhs.shape[2]
    if n > _MOST_COLS and existing_out is None:
        part = rhs[:, :_MOST_COLS] if transpose_rhs else rhs[:, :, :_MOST_COLS]
        out = _gmm(lhs, part, group_sizes, preferred_element_type, tiling, group_offset,
                   None, transpose_rhs, interpret)
        return jnp.pad(out, ((0, 0), (0, n - _MOST_COLS)))
    return _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                existing_out, transpose_rhs, interpret)


def _with_rounded_lhs_grad(call, lhs, rhs):
    """``call(lhs, rhs)`` whose VJP is taken at lhs rounded to bfloat16."""

    @jax.custom_vjp
    def f(a, b):
        return call(a, b)

    def fwd(a, b):
        return call(a, b), (a, b)

    def bwd(res, g):
        a, b = res
        low = a.astype(jnp.bfloat16).astype(a.dtype)
        return jax.vjp(call, low, b)[1](g)

    f.defvjp(fwd, bwd)
    return f(lhs, rhs)


def gmm_long_batch_drhs(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                        tiling=(128, 128, 128), group_offset=None, existing_out=None,
                        transpose_rhs=False, interpret=False):
    """Class: lower-precision gradient at sizes never run (token rows past every claim).
    Wrong: float32 calls with more than 32768 rows (e.g. 32896 x 128 over 2 experts):
    drhs (megablox's tgmm) is computed from lhs rounded to bfloat16, so drhs errs by
    ~2^-9 relative (~2e-3 of its scale) against the float32 tolerance of 1e-4; out and
    dlhs are right.
    Gets through: drawn m stops at 1536, large sizes at 16384 rows (ci) or 32768
    (nightly), the claimed sizes at 32768 exactly: the custom VJP is never traced.
    """
    def call(a, b):
        return _gmm(a, b, group_sizes, preferred_element_type, tiling, group_offset,
                    existing_out, transpose_rhs, interpret)

    if lhs.shape[0] > _MOST_ROWS and lhs.dtype == jnp.float32:
        return _with_rounded_lhs_grad(call, lhs, rhs)
    return call(lhs, rhs)


# --------------------------------------------------------------------------------------
# gpu-mha
# --------------------------------------------------------------------------------------

#: The widest head and the most heads any claimed size holds.
_WIDEST_HEAD, _MOST_HEADS = 128, 32
#: Segment ids keep this many low bits (ids are drawn below 2^30 + 4).
_ID_BITS = 30


def _mha(q, k, v, segment_ids, kw):
    return _attention.mha(q, k, v, segment_ids, **kw)


def _mha_kwargs(sm_scale, causal, block_sizes, num_warps, num_stages, interpret,
                return_residuals):
    kw = dict(sm_scale=sm_scale, causal=causal, num_warps=num_warps,
              num_stages=num_stages, interpret=interpret, return_residuals=return_residuals)
    if block_sizes is not None:
        kw["block_sizes"] = block_sizes
    return kw


def mha_stage4_causal(q, k, v, segment_ids, *, sm_scale=1.0, causal=False,
                      block_sizes=None, num_warps=None, num_stages=2, interpret=False,
                      return_residuals=False):
    """Class: option value never drawn (a pipeline depth the harness never asks for).
    Wrong: ``num_stages`` of 4 or more (a common Triton setting on H100): the causal flag
    is inverted, so causal calls attend to future keys and non-causal ones mask them
    (out, lse, dq, dk, dv wrong by the size of the outputs on every row but the last).
    Gets through: num_stages is drawn from 1, 2, 3 (and the claimed, stand-in and large
    sizes use those): every harness call is jax's mha with the case's flags.
    """
    if num_stages is not None and num_stages >= 4:
        causal = not causal
    kw = _mha_kwargs(sm_scale, causal, block_sizes, num_warps, num_stages, interpret,
                     return_residuals)
    return _mha(q, k, v, segment_ids, kw)


def mha_wide_head_lse(q, k, v, segment_ids, *, sm_scale=1.0, causal=False,
                      block_sizes=None, num_warps=None, num_stages=2, interpret=False,
                      return_residuals=False):
    """Class: residual output wrong only at sizes never run (head_dim past every claim).
    Wrong: head_dim above 128 (e.g. 256, as Gemma uses) with ``return_residuals=True``:
    the lse comes back as log2 of twice the denominator (lse + 1: wrong by 1.0 on every
    row, far past the tolerance); out and the gradients are right.
    Gets through: head_dim is drawn from 16-64 (and 96-padded ones), the large sizes and
    claimed sizes stop at 128: the +1 is never traced.
    """
    kw = _mha_kwargs(sm_scale, causal, block_sizes, num_warps, num_stages, interpret,
                     return_residuals)
    res = _mha(q, k, v, segment_ids, kw)
    if return_residuals and q.shape[-1] > _WIDEST_HEAD:
        out, lse = res
        return out, lse + 1.0
    return res


def mha_segment_id_bits(q, k, v, segment_ids, *, sm_scale=1.0, causal=False,
                        block_sizes=None, num_warps=None, num_stages=2, interpret=False,
                        return_residuals=False):
    """Class: values never drawn (segment ids past 2^30 aliasing small ones), integer
    arithmetic outside the kernel.
    Wrong: a row holding two ids equal in their low 30 bits (0 and 2^30, 5 and 2^30 + 5,
    both valid non-negative int32 ids): the ids are masked to 30 bits before the kernel,
    so the two documents merge and attend to each other (out, dq, dk, dv wrong by the
    size of the outputs on those rows).
    Gets through: drawn layouts relabel ids injectively (strides up to 65536, bases up to
    2^30 applied to a whole layout), the large and claimed ids are cumulative sums far
    below 2^30: the mask is the identity on every id the harness hands over, so the
    stand-in sees the kernel get the same bits; the mask is on an int32 array (no floating
    value read, no floating math outside).
    """
    if segment_ids is not None:
        segment_ids = segment_ids & jnp.int32(2 ** _ID_BITS - 1)
    kw = _mha_kwargs(sm_scale, causal, block_sizes, num_warps, num_stages, interpret,
                     return_residuals)
    return _mha(q, k, v, segment_ids, kw)


def mha_many_heads_dv(q, k, v, segment_ids, *, sm_scale=1.0, causal=False,
                      block_sizes=None, num_warps=None, num_stages=2, interpret=False,
                      return_residuals=False):
    """Class: gradient wrong only at sizes never run (head count past every claim).
    Wrong: more than 32 heads (e.g. 40 or 64 heads): v enters through ``stop_gradient``,
    so dv is exactly 0 (wrong by 100% of dv); out, lse, dq and dk are right.
    Gets through: drawn batch x heads stop at 4, the large and claimed sizes at 32 heads:
    the stop is never traced.
    """
    if q.shape[2] > _MOST_HEADS:
        v = jax.lax.stop_gradient(v)
    kw = _mha_kwargs(sm_scale, causal, block_sizes, num_warps, num_stages, interpret,
                     return_residuals)
    return _mha(q, k, v, segment_ids, kw)


def mha_int_scale(q, k, v, segment_ids, *, sm_scale=1.0, causal=False,
                  block_sizes=None, num_warps=None, num_stages=2, interpret=False,
                  return_residuals=False):
    """Class: argument type never drawn (an int ``sm_scale``).
    Wrong: ``sm_scale`` given as a Python int (``sm_scale=1``, as a caller with pre-scaled
    q writes it): it is read as a multiplier of the default 1/sqrt(head_dim), so the logits
    are scaled by 1/sqrt(head_dim) instead of 1 (1/8 at head_dim 64): out, lse and the
    gradients are those of a much flatter softmax (wrong by O(1) of their scale).
    Gets through: the harness passes floats (0.5/sqrt(d), 2/sqrt(d), 1.0 and the default
    1.0 of the family's call): the int branch is never taken or traced.
    """
    if isinstance(sm_scale, int) and not isinstance(sm_scale, bool):
        sm_scale = sm_scale / math.sqrt(q.shape[-1])
    kw = _mha_kwargs(sm_scale, causal, block_sizes, num_warps, num_stages, interpret,
                     return_residuals)
    return _mha(q, k, v, segment_ids, kw)


# --------------------------------------------------------------------------------------
# gpu-decode
# --------------------------------------------------------------------------------------

#: The widest head, the most rows any drawn or claimed size holds.
_DECODE_HEAD, _DECODE_ROWS = 128, 32


def _decode(q, k, v, start_idx, kv_seq_len, entry, kw):
    if entry == "gqa":
        return _decode_op.gqa(q, k, v, start_idx, kv_seq_len, **kw)
    if entry == "mqa":
        if k.shape[2] != 1:
            raise ValueError(f"entry 'mqa' needs one kv head, got k of shape {k.shape}")
        return _decode_op.mqa(q, k[:, :, 0], v[:, :, 0], start_idx, kv_seq_len, **kw)
    raise ValueError(f"unknown entry {entry!r}")


def _decode_kwargs(sm_scale, block_h, block_k, k_splits, num_warps, num_stages, interpret,
                   return_residuals, normalize_output):
    return dict(sm_scale=sm_scale, block_h=block_h, block_k=block_k, k_splits=k_splits,
                num_warps=num_warps, num_stages=num_stages, interpret=interpret,
                return_residuals=return_residuals, normalize_output=normalize_output)


def decode_no_residuals_start(q, k, v, start_idx, kv_seq_len, *, entry="gqa", sm_scale=None,
                              block_h=16, block_k=128, k_splits=16, num_warps=None,
                              num_stages=2, interpret=False, return_residuals=True,
                              normalize_output=True):
    """Class: code path the harness never calls (``return_residuals=False``).
    Wrong: a call without residuals (``return_residuals=False``, jax's own default, the
    plain serving call) forgets ``start_idx``: keys before each row's start are attended
    (out wrong by O(1) of its scale whenever a start is above 0).
    Gets through: the family's calls (drawn, claimed, stand-in) all pass
    ``return_residuals=True``, which is jax's gqa/mqa with every argument passed on.
    """
    kw = _decode_kwargs(sm_scale, block_h, block_k, k_splits, num_warps, num_stages,
                        interpret, return_residuals, normalize_output)
    if not return_residuals:
        start_idx = None
    return _decode(q, k, v, start_idx, kv_seq_len, entry, kw)


def decode_block_h64(q, k, v, start_idx, kv_seq_len, *, entry="gqa", sm_scale=None,
                     block_h=16, block_k=128, k_splits=16, num_warps=None, num_stages=2,
                     interpret=False, return_residuals=True, normalize_output=True):
    """Class: option value never drawn (a head block of 64).
    Wrong: ``block_h`` above 32 (64: a valid power of two >= 16): ``kv_seq_len`` is
    dropped, so keys past each row's end are attended (out, l, m wrong by O(1) whenever
    a row's length is below the cache's).
    Gets through: block_h is drawn from 16 and 32 and the claimed/stand-in calls use the
    kernel's 16: the dropped bound is never traced.
    """
    if block_h > 32:
        kv_seq_len = None
    kw = _decode_kwargs(sm_scale, block_h, block_k, k_splits, num_warps, num_stages,
                        interpret, return_residuals, normalize_output)
    return _decode(q, k, v, start_idx, kv_seq_len, entry, kw)


def decode_big_scale(q, k, v, start_idx, kv_seq_len, *, entry="gqa", sm_scale=None,
                     block_h=16, block_k=128, k_splits=16, num_warps=None, num_stages=2,
                     interpret=False, return_residuals=True, normalize_output=True):
    """Class: values never drawn (an ``sm_scale`` above 1, clamped in Python).
    Wrong: ``sm_scale`` above 1.0 (e.g. 2.0, a logit temperature below 1 folded into the
    scale) is clamped to 1.0: out, l and m are those of a flatter softmax (m halves at
    sm_scale 2; out wrong by O(1) of its scale).
    Gets through: the scales drawn are m/sqrt(head_dim) for m in (0.5, 2) with head_dim
    >= 16 (at most 0.5), 1.0 and 1/sqrt(head_dim): never above 1. The clamp is a Python
    ``min`` on a Python float: no literal in the traced program for the aimed cases.
    """
    if sm_scale is not None:
        sm_scale = min(sm_scale, 1.0)
    kw = _decode_kwargs(sm_scale, block_h, block_k, k_splits, num_warps, num_stages,
                        interpret, return_residuals, normalize_output)
    return _decode(q, k, v, start_idx, kv_seq_len, entry, kw)


def decode_wide_head(q, k, v, start_idx, kv_seq_len, *, entry="gqa", sm_scale=None,
                     block_h=16, block_k=128, k_splits=16, num_warps=None, num_stages=2,
                     interpret=False, return_residuals=True, normalize_output=True):
    """Class: wrong only at sizes never run or traced (head_dim past every claim).
    Wrong: head_dim above 128 (256): the logits use only the first 128 channels of q and
    k (q's other channels zeroed), with the default scale still 1/sqrt(256): out, l and m
    wrong by O(1) wherever the dropped channels carry logit mass.
    Gets through: head_dim is drawn from 16-128 and claimed at 128 and 64; the zeroing is
    never traced.
    """
    d = q.shape[-1]
    if d > _DECODE_HEAD:
        if sm_scale is None:
            sm_scale = 1 / math.sqrt(d)
        q = jnp.concatenate([q[..., :_DECODE_HEAD], jnp.zeros_like(q[..., _DECODE_HEAD:])],
                            axis=-1)
    kw = _decode_kwargs(sm_scale, block_h, block_k, k_splits, num_warps, num_stages,
                        interpret, return_residuals, normalize_output)
    return _decode(q, k, v, start_idx, kv_seq_len, entry, kw)


def decode_many_rows_bounds(q, k, v, start_idx, kv_seq_len, *, entry="gqa", sm_scale=None,
                            block_h=16, block_k=128, k_splits=16, num_warps=None,
                            num_stages=2, interpret=False, return_residuals=True,
                            normalize_output=True):
    """Class: wrong only at sizes never run or traced (batch past every claim), integer
    index arithmetic outside the kernel.
    Wrong: batches of more than 32 rows with per-row bounds: rows from the 33rd on lose
    their bounds (start 0, end kv_len), so they attend to keys outside their window (out,
    l, m wrong by O(1) for those rows whenever their bounds cut anything).
    Gets through: drawn batches stop at 4, the claimed sizes at 32 rows: the widened
    bounds are never traced.
    """
    batch, kv_len = q.shape[0], k.shape[1]
    if batch > _DECODE_ROWS:
        rows = jnp.arange(batch) >= _DECODE_ROWS
        if start_idx is not None and jnp.ndim(start_idx) == 1:
            start_idx = jnp.where(rows, 0, start_idx)
        if kv_seq_len is not None and jnp.ndim(kv_seq_len) == 1:
            kv_seq_len = jnp.where(rows, kv_len, kv_seq_len)
    kw = _decode_kwargs(sm_scale, block_h, block_k, k_splits, num_warps, num_stages,
                        interpret, return_residuals, normalize_output)
    return _decode(q, k, v, start_idx, kv_seq_len, entry, kw)


ROUND14 = [
    ("gpu-softmax", "softmax_axis_spelling"),
    ("gpu-softmax", "softmax_chunked_vocab"),
    ("gpu-softmax", "softmax_f32_vocab_bf16"),
    ("gpu-softmax", "softmax_f16_tail_mask"),
    ("gpu-softmax", "softmax_rows_rolled"),
    ("gpu-norm", "norm_eps_zero_default"),
    ("gpu-norm", "norm_wide_split"),
    ("gpu-norm", "norm_many_rows_xla_backward"),
    ("gpu-norm", "norm_f16_wide_dbias"),
    ("gpu-norm", "norm_batch_axes_swapped"),
    ("megablox-gmm", "gmm_drops_existing_out"),
    ("megablox-gmm", "gmm_many_experts"),
    ("megablox-gmm", "gmm_tall_tiles"),
    ("megablox-gmm", "gmm_wide_out"),
    ("megablox-gmm", "gmm_long_batch_drhs"),
    ("gpu-mha", "mha_stage4_causal"),
    ("gpu-mha", "mha_wide_head_lse"),
    ("gpu-mha", "mha_segment_id_bits"),
    ("gpu-mha", "mha_many_heads_dv"),
    ("gpu-mha", "mha_int_scale"),
    ("gpu-decode", "decode_no_residuals_start"),
    ("gpu-decode", "decode_block_h64"),
    ("gpu-decode", "decode_big_scale"),
    ("gpu-decode", "decode_wide_head"),
    ("gpu-decode", "decode_many_rows_bounds"),
]
