"""Adversarial implementations, round 10: written independently under the round's rules
(harness source, README and docs read; no tests, no catalogs, no golden data, no git
history, and the harness never run on these implementations).

Three themes, one of each per family:

- ``*_past_ci_caps``: right at every size the ci profile runs (the drawn cases, the ci
  tier's large-size caps, the wrapper stand-in sizes), wrong at the family's claimed sizes,
  which ``claimed-sizes`` only traces. The wrongness is layout only (slices, concatenates,
  integer bounds), so tracing sees nothing the family's outside-kernel rules measure.
- ``*_eager_only``: right whenever traced (every harness call runs under ``jax.jit``),
  wrong when a user calls it eagerly on concrete arrays.
- ``*_unobserved``: right in any process that has imported ``kernel_harness`` (every
  harness run), wrong in a user's process that has not.
- ``*_after_date``: right until 2027-01-01 UTC (the clock read when traced), wrong from
  then on: a check run today passes, a user's run next month is wrong.
- ``*_compiled_only``: right with ``interpret`` true (the CPU ``interpret`` backend that
  ci runs), wrong with ``interpret=False`` (a real GPU / TPU run): the kernel's result is
  not the answer there.

Each was confirmed by /tmp/round10/confirm.py (CPU, Pallas interpret mode, against plain
jax.numpy references); for the compiled-only ones the ``interpret=False`` branch was
simulated by running the same code path with the kernel interpreted.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.gpu import attention as _attention
from jax.experimental.pallas.ops.gpu import decode_attention as _decode
from jax.experimental.pallas.ops.gpu import layer_norm as _layer_norm
from jax.experimental.pallas.ops.gpu import rms_norm as _rms_norm
from jax.experimental.pallas.ops.gpu import softmax as _softmax
from jax.experimental.pallas.ops.tpu.megablox import ops as _megablox

# ----------------------------------------------------------------------------- helpers


def _is_eager(x: Any) -> bool:
    """Whether ``x`` is a concrete array (an eager call), not a tracer (jit, vjp, eval_shape)."""
    return not isinstance(x, jax.core.Tracer)


def _is_compiled(interpret: Any) -> bool:
    """Whether the kernel runs for real (GPU / TPU): ``interpret`` exactly False."""
    return interpret is False


def _observed() -> bool:
    """Whether the harness is loaded in this process (any ``kernel_harness`` module)."""
    return "kernel_harness" in sys.modules


#: 2027-01-01 00:00 UTC: the ``*_after_date`` implementations go wrong from then on.
_DEADLINE = 1798761600.0


def _expired() -> bool:
    return time.time() >= _DEADLINE


def _dup_first_into(x: jax.Array, axis: int, pos: int) -> jax.Array:
    """``x`` with index ``pos`` along ``axis`` replaced by index 0 (slices and a concatenate
    only: layout)."""
    x = jnp.moveaxis(x, axis, 0)
    x = jnp.concatenate([x[:pos], x[:1], x[pos + 1:]], axis=0)
    return jnp.moveaxis(x, 0, axis)


def _norm_kernel(op: str) -> Any:
    if op == "layer_norm":
        return _layer_norm.layer_norm
    if op == "rms_norm":
        return _rms_norm.rms_norm
    raise ValueError(f"unknown op {op!r}; use 'layer_norm' or 'rms_norm'")


def _decode_call(q, k, v, start_idx, kv_seq_len, entry, kwargs):
    if entry == "gqa":
        return _decode.gqa(q, k, v, start_idx, kv_seq_len, **kwargs)
    if entry == "mqa":
        if k.shape[2] != 1:
            raise ValueError(f"entry 'mqa' needs one kv head, got k of shape {k.shape}")
        return _decode.mqa(q, k[:, :, 0], v[:, :, 0], start_idx, kv_seq_len, **kwargs)
    raise ValueError(f"unknown entry {entry!r}; use 'gqa' or 'mqa'")


# ------------------------------------------------------------------------- gpu-softmax

# Wrong at the claimed (8, 262144) bfloat16 and (64, 32000) float32: a 2-D x of 3 or more
# rows longer than 1025 (drawn rows stop at 1025 lanes and the ci large sizes cap those
# vocabularies at 2 rows; the stand-in sizes use 2 rows) gets row 2 replaced by row 0's
# softmax. Script: (3, 2048) float32, row 2 max abs err 6.7e-3, rows 0-1 within 1e-9;
# (2, 2048) and (3, 1000) within 4e-9.
def softmax_past_ci_caps(x, *, axis=-1, interpret=False, **kwargs):
    if x.ndim == 2 and x.shape[0] >= 3 and x.shape[-1] > 1025:
        x = _dup_first_into(x, 0, 2)
    return _softmax.softmax(x, axis=axis, interpret=interpret, **kwargs)


# Wrong when called eagerly (concrete arrays): the result is the kernel's on x rounded to
# bfloat16 (float32 inputs lose 16 mantissa bits). Every harness call is traced, so the
# checks see the exact path. Script: float32 (4, 300), eager max err 5.9e-3 of the largest
# probability vs jax.nn.softmax (2e5 times the fixed 5e-6 bound's worst seen); jitted 1.9e-9.
def softmax_eager_only(x, *, axis=-1, interpret=False, **kwargs):
    if _is_eager(x) and x.dtype == jnp.float32:
        y = _softmax.softmax(x.astype(jnp.bfloat16), axis=axis, interpret=interpret, **kwargs)
        return y.astype(x.dtype)
    return _softmax.softmax(x, axis=axis, interpret=interpret, **kwargs)


# Wrong in a real GPU run (interpret=False): the last logit of every row is dropped from
# the softmax (the kernel runs on x[..., :-1]; the last probability is copied from its
# neighbour). Simulated on CPU by taking the branch with the kernel interpreted: (4, 300)
# float32 max abs err 1.9e-3 (rows no longer sum to 1); interpret=True within 1.9e-9.
def softmax_compiled_only(x, *, axis=-1, interpret=False, **kwargs):
    return _softmax_compiled_only(x, axis, interpret, _is_compiled(interpret), kwargs)


def _softmax_compiled_only(x, axis, interpret, wrong, kwargs):
    if wrong and x.shape[-1] > 1:
        y = _softmax.softmax(x[..., :-1], axis=axis, interpret=interpret, **kwargs)
        return jnp.concatenate([y, y[..., -1:]], axis=-1)
    return _softmax.softmax(x, axis=axis, interpret=interpret, **kwargs)


# Wrong in a process without the harness: the probabilities come back reversed along the
# row. Script (kernel_harness not imported vs a stand-in 'kernel_harness' entry put in
# sys.modules): (4, 300) float32 unobserved max abs err 0.041; observed within 8e-9.
def softmax_unobserved(x, *, axis=-1, interpret=False, **kwargs):
    y = _softmax.softmax(x, axis=axis, interpret=interpret, **kwargs)
    return y if _observed() else y[..., ::-1]


# Wrong from 2027-01-01: the last logit of each row is treated as masked (its probability
# 0, the rest renormalized). Script (branch forced): (4, 300) float32 max abs err 4.7e-3;
# today (2026-12) within 8e-9.
def softmax_after_date(x, *, axis=-1, interpret=False, **kwargs):
    return _softmax_after_date(x, axis, interpret, _expired(), kwargs)


def _softmax_after_date(x, axis, interpret, wrong, kwargs):
    if wrong and x.shape[-1] > 1:
        y = _softmax.softmax(x[..., :-1], axis=axis, interpret=interpret, **kwargs)
        return jnp.concatenate([y, jnp.zeros_like(y[..., -1:])], axis=-1)
    return _softmax.softmax(x, axis=axis, interpret=interpret, **kwargs)


# ---------------------------------------------------------------------------- gpu-norm

# Wrong at the claimed (1, 4096, 8192) bfloat16 and (2, 1024, 16384) float32: more than
# 1000 rows (drawn rows stop at 99, the ci large sizes cap them at 300, nightly at 1000) and
# the last row is normalized from row 0's values (out, dx, dweight all touched). Script:
# layer_norm (1, 1001, 128) float32, last row max abs err 11.4 (out), dx 2.5 (rms_norm 9.0,
# 3.7); (1, 300, 128) within 2e-6.
def norm_past_ci_caps(op, x, weight, bias, *, eps, interpret, **kwargs):
    if x.ndim == 3 and x.shape[1] > 1000:
        x = _dup_first_into(x, 1, x.shape[1] - 1)
    return _norm_kernel(op)(x, weight, bias, eps=eps, interpret=interpret, **kwargs)


# Wrong when called eagerly: eps is taken 1000x larger (1e-5 -> 1e-2), so rows of small
# variance come out shrunk. Traced (every harness call) it is exact. Script: layer_norm
# (2, 4, 128) float32 with x scaled 0.05, eager max abs err 3.7 (rms_norm 4.4); jitted 1e-6.
def norm_eager_only(op, x, weight, bias, *, eps, interpret, **kwargs):
    if _is_eager(x):
        eps = eps * 1000.0
    return _norm_kernel(op)(x, weight, bias, eps=eps, interpret=interpret, **kwargs)


# Wrong in a real GPU run: weight and bias are swapped when the kernel is compiled.
# Simulated (branch taken, kernel interpreted): layer_norm (2, 4, 128) float32 max abs err
# 15.4 (rms_norm 15.5); interpret=True within 1e-6.
def norm_compiled_only(op, x, weight, bias, *, eps, interpret, **kwargs):
    return _norm_compiled_only(op, x, weight, bias, eps, interpret, _is_compiled(interpret),
                               kwargs)


def _norm_compiled_only(op, x, weight, bias, eps, interpret, wrong, kwargs):
    if wrong:
        weight, bias = bias, weight
    return _norm_kernel(op)(x, weight, bias, eps=eps, interpret=interpret, **kwargs)


# Wrong in a process without the harness: the bias is dropped. Script: layer_norm
# (2, 4, 128) float32 unobserved max abs err 2.4; observed within 1e-6.
def norm_unobserved(op, x, weight, bias, *, eps, interpret, **kwargs):
    if not _observed():
        bias = jnp.zeros_like(bias)
    return _norm_kernel(op)(x, weight, bias, eps=eps, interpret=interpret, **kwargs)


# Wrong from 2027-01-01: the op switches (layer_norm <-> rms_norm). Script (branch
# forced): layer_norm (2, 4, 128) float32 max abs err 0.83; today within 1e-6.
def norm_after_date(op, x, weight, bias, *, eps, interpret, **kwargs):
    return _norm_after_date(op, x, weight, bias, eps, interpret, _expired(), kwargs)


def _norm_after_date(op, x, weight, bias, eps, interpret, wrong, kwargs):
    if wrong:
        op = {"layer_norm": "rms_norm", "rms_norm": "layer_norm"}.get(op, op)
    return _norm_kernel(op)(x, weight, bias, eps=eps, interpret=interpret, **kwargs)


# ------------------------------------------------------------------------ megablox-gmm

# Wrong at the claimed (32768 x 4096 -> 14336, 64 experts) bfloat16 and (16384 x 6144 ->
# 4096, 8) float32: m >= 2048 rows and n >= 2048 columns together (the ci large sizes have
# n = 128, the stand-in sizes with n >= 2048 have m = 256) and the last token row is
# multiplied as if it were row 0. Script: m = n = 2048, k = 128, 2 groups, float32: last row
# max abs err 65; m = 256, n = 2048 exact.
def gmm_past_ci_caps(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                     tiling=(128, 128, 128), group_offset=None, existing_out=None,
                     transpose_rhs=False, interpret=False):
    n = rhs.shape[1] if transpose_rhs else rhs.shape[2]
    if lhs.shape[0] >= 2048 and n >= 2048:
        lhs = _dup_first_into(lhs, 0, lhs.shape[0] - 1)
    return _megablox.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                         existing_out, transpose_rhs, interpret)


# Wrong when called eagerly: the last group's size is taken as 0, so its rows are never
# written (uninitialized: NaN in interpret mode, garbage on a TPU). Script: m = 256,
# k = n = 128, 2 groups of 128, float32: eager rows 128..255 all NaN (16384 of them), rows
# 0..127 exact; jitted exact.
def gmm_eager_only(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                   tiling=(128, 128, 128), group_offset=None, existing_out=None,
                   transpose_rhs=False, interpret=False):
    if _is_eager(lhs):
        group_sizes = group_sizes.at[-1].set(0)
    return _megablox.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                         existing_out, transpose_rhs, interpret)


# Wrong in a real TPU run: the rhs experts are read rotated by one (group g multiplied by
# expert g + 1). Simulated (branch taken, kernel interpreted): m = 256, k = n = 128, 2
# groups, float32 max abs err 75; interpret=True exact.
def gmm_compiled_only(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                      tiling=(128, 128, 128), group_offset=None, existing_out=None,
                      transpose_rhs=False, interpret=False):
    return _gmm_compiled_only(lhs, rhs, group_sizes, preferred_element_type, tiling,
                              group_offset, existing_out, transpose_rhs, interpret,
                              _is_compiled(interpret))


def _gmm_compiled_only(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                       existing_out, transpose_rhs, interpret, wrong):
    if wrong and rhs.shape[0] > 1:
        rhs = jnp.concatenate([rhs[1:], rhs[:1]], axis=0)
    return _megablox.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                         existing_out, transpose_rhs, interpret)


# Wrong in a process without the harness: group sizes are read in reverse order (rows go
# to the wrong experts whenever the sizes are not a palindrome). Script: m = 256, k = n =
# 128, groups (64, 192), float32: unobserved max abs err 73; observed exact.
def gmm_unobserved(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                   tiling=(128, 128, 128), group_offset=None, existing_out=None,
                   transpose_rhs=False, interpret=False):
    if not _observed():
        group_sizes = group_sizes[::-1]
    return _megablox.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                         existing_out, transpose_rhs, interpret)


# Wrong from 2027-01-01: rhs is read transposed the other way (transpose_rhs flipped, on
# square experts). Script (branch forced): m = 256, k = n = 128, 2 groups, float32 max abs
# err 75; today exact.
def gmm_after_date(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                   tiling=(128, 128, 128), group_offset=None, existing_out=None,
                   transpose_rhs=False, interpret=False):
    return _gmm_after_date(lhs, rhs, group_sizes, preferred_element_type, tiling,
                           group_offset, existing_out, transpose_rhs, interpret, _expired())


def _gmm_after_date(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                    existing_out, transpose_rhs, interpret, wrong):
    if wrong and rhs.shape[1] == rhs.shape[2]:
        transpose_rhs = not transpose_rhs
    return _megablox.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                         existing_out, transpose_rhs, interpret)


# ----------------------------------------------------------------------------- gpu-mha

# Wrong at the claimed 32k (bfloat16, causal), 16k (float16, segments) and 64k (float32)
# contexts: more than 4352 tokens (ci caps contexts at 4352; no stand-in sizes) and the last
# query is computed as query 0 (out, lse and dq of those rows wrong). Script: (1, 4480, 1,
# 16) float32 non-causal: last query max abs err 0.81; (1, 256, 1, 16) within 1e-6.
def mha_past_ci_caps(q, k, v, segment_ids, **kwargs):
    if q.shape[1] > 4352:
        q = _dup_first_into(q, 1, q.shape[1] - 1)
    return _attention.mha(q, k, v, segment_ids, **kwargs)


# Wrong when called eagerly: the causal flag is dropped (every query sees every key).
# Script: (1, 128, 2, 32) float32 causal: eager max abs err 3.9; jitted 1.7e-6.
def mha_eager_only(q, k, v, segment_ids, **kwargs):
    if _is_eager(q):
        kwargs["causal"] = False
    return _attention.mha(q, k, v, segment_ids, **kwargs)


# Wrong in a real GPU run: sm_scale is applied twice. Simulated (branch taken, kernel
# interpreted): (1, 128, 2, 32) float32, sm_scale 0.5: max abs err 2.0; interpret=True
# within 1.7e-6.
def mha_compiled_only(q, k, v, segment_ids, **kwargs):
    return _mha_compiled_only(q, k, v, segment_ids, _is_compiled(kwargs.get("interpret")),
                              kwargs)


def _mha_compiled_only(q, k, v, segment_ids, wrong, kwargs):
    if wrong:
        kwargs = dict(kwargs, sm_scale=kwargs.get("sm_scale", 1.0) ** 2)
    return _attention.mha(q, k, v, segment_ids, **kwargs)


# Wrong in a process without the harness: the values are read one key late (v rolled by
# one along the keys). Script: (1, 128, 2, 32) float32 non-causal: unobserved max abs err
# 5.6; observed within 1.5e-6.
def mha_unobserved(q, k, v, segment_ids, **kwargs):
    if not _observed():
        v = jnp.concatenate([v[:, 1:], v[:, :1]], axis=1)
    return _attention.mha(q, k, v, segment_ids, **kwargs)


# Wrong from 2027-01-01: k and v swap roles. Script (branch forced): (1, 128, 2, 32)
# float32 max abs err 4.3; today within 1.5e-6.
def mha_after_date(q, k, v, segment_ids, **kwargs):
    return _mha_after_date(q, k, v, segment_ids, _expired(), kwargs)


def _mha_after_date(q, k, v, segment_ids, wrong, kwargs):
    if wrong:
        k, v = v, k
    return _attention.mha(q, k, v, segment_ids, **kwargs)


# -------------------------------------------------------------------------- gpu-decode

# Wrong at the claimed 131072- and 32768-key caches: every row's end bound is clamped to
# 2048 keys (drawn caches stop at 1024 keys; the family runs no large sizes; the bounds are
# [batch] int32, index arithmetic the outside-kernel rules do not measure). Script: batch
# 1, 4096 keys, 8 q heads over 2 kv heads of 64, float32: out max abs err 3.9, lse 5.1;
# 1024 keys within 4e-6.
def decode_past_ci_caps(q, k, v, start_idx, kv_seq_len, *, entry="gqa", **kwargs):
    batch, kv_len = q.shape[0], k.shape[1]
    end = jnp.full((batch,), kv_len, jnp.int32) if kv_seq_len is None else kv_seq_len
    end = jnp.minimum(jnp.broadcast_to(jnp.asarray(end, jnp.int32), (batch,)), 2048)
    return _decode_call(q, k, v, start_idx, end, entry, kwargs)


# Wrong when called eagerly: the start bound is ignored (keys before start_idx attended).
# Script: batch 2, 256 keys, start_idx (64, 100): eager out max abs err 4.5; jitted 3e-6.
def decode_eager_only(q, k, v, start_idx, kv_seq_len, *, entry="gqa", **kwargs):
    if _is_eager(q):
        start_idx = None
    return _decode_call(q, k, v, start_idx, kv_seq_len, entry, kwargs)


# Wrong in a real GPU run: the kv heads are read rotated by one (q head group g attends kv
# head g + 1). Simulated (branch taken, kernel interpreted): batch 1, 256 keys, 8 q heads
# over 2 kv heads: out max abs err 4.1; interpret=True within 3e-6.
def decode_compiled_only(q, k, v, start_idx, kv_seq_len, *, entry="gqa", **kwargs):
    return _decode_compiled_only(q, k, v, start_idx, kv_seq_len, entry,
                                 _is_compiled(kwargs.get("interpret")), kwargs)


def _decode_compiled_only(q, k, v, start_idx, kv_seq_len, entry, wrong, kwargs):
    if wrong and k.shape[2] > 1:
        k = jnp.concatenate([k[:, :, 1:], k[:, :, :1]], axis=2)
        v = jnp.concatenate([v[:, :, 1:], v[:, :, :1]], axis=2)
    return _decode_call(q, k, v, start_idx, kv_seq_len, entry, kwargs)


# Wrong in a process without the harness: sm_scale is doubled. Script: batch 2, 256 keys,
# start_idx (64, 100), sm_scale 1: unobserved out max abs err 0.94; observed within 9e-6.
def decode_unobserved(q, k, v, start_idx, kv_seq_len, *, entry="gqa", **kwargs):
    if not _observed():
        kwargs = dict(kwargs, sm_scale=2.0 * (kwargs.get("sm_scale") or 1.0))
    return _decode_call(q, k, v, start_idx, kv_seq_len, entry, kwargs)


# Wrong from 2027-01-01: the end bound is dropped (keys past kv_seq_len attended). Script
# (branch forced): batch 2, 256 keys, ends (256, 200): out max abs err 3.6; today 9e-6.
def decode_after_date(q, k, v, start_idx, kv_seq_len, *, entry="gqa", **kwargs):
    return _decode_after_date(q, k, v, start_idx, kv_seq_len, entry, _expired(), kwargs)


def _decode_after_date(q, k, v, start_idx, kv_seq_len, entry, wrong, kwargs):
    if wrong:
        kv_seq_len = None
    return _decode_call(q, k, v, start_idx, kv_seq_len, entry, kwargs)


ROUND10 = [
    ("gpu-softmax", "softmax_past_ci_caps",
     "claimed sizes: wrong row 2 for 2-D x of >= 3 rows longer than 1025 (8x262144 bf16, "
     "64x32000 f32)"),
    ("gpu-softmax", "softmax_eager_only",
     "eager vs traced: float32 rounded to bfloat16 when called eagerly"),
    ("gpu-softmax", "softmax_compiled_only",
     "compiled vs interpreted: last logit dropped with interpret=False"),
    ("gpu-norm", "norm_past_ci_caps",
     "claimed sizes: last row normalized from row 0 past 1000 rows (1x4096x8192, 2x1024x16384)"),
    ("gpu-norm", "norm_eager_only", "eager vs traced: eps x1000 when called eagerly"),
    ("gpu-norm", "norm_compiled_only",
     "compiled vs interpreted: weight and bias swapped with interpret=False"),
    ("megablox-gmm", "gmm_past_ci_caps",
     "claimed sizes: last lhs row replaced by row 0 when m >= 2048 and n >= 2048"),
    ("megablox-gmm", "gmm_eager_only", "eager vs traced: last group zeroed when called eagerly"),
    ("megablox-gmm", "gmm_compiled_only",
     "compiled vs interpreted: experts rotated by one with interpret=False"),
    ("gpu-mha", "mha_past_ci_caps",
     "claimed sizes: last query computed as query 0 past 4352 tokens (16k-64k contexts)"),
    ("gpu-mha", "mha_eager_only", "eager vs traced: causal mask dropped when called eagerly"),
    ("gpu-mha", "mha_compiled_only",
     "compiled vs interpreted: sm_scale squared with interpret=False"),
    ("gpu-decode", "decode_past_ci_caps",
     "claimed sizes: end bound clamped to 2048 keys (131072- and 32768-key caches)"),
    ("gpu-decode", "decode_eager_only",
     "eager vs traced: start_idx ignored when called eagerly"),
    ("gpu-decode", "decode_compiled_only",
     "compiled vs interpreted: kv heads rotated by one with interpret=False"),
    ("gpu-softmax", "softmax_unobserved",
     "observed vs user's run: probabilities reversed unless kernel_harness is loaded"),
    ("gpu-norm", "norm_unobserved", "observed vs user's run: bias dropped without the harness"),
    ("megablox-gmm", "gmm_unobserved",
     "observed vs user's run: group sizes reversed without the harness"),
    ("gpu-mha", "mha_unobserved", "observed vs user's run: v rolled one key without the harness"),
    ("gpu-decode", "decode_unobserved",
     "observed vs user's run: sm_scale doubled without the harness"),
    ("gpu-softmax", "softmax_after_date", "over time: last logit masked from 2027-01-01"),
    ("gpu-norm", "norm_after_date", "over time: layer_norm/rms_norm swapped from 2027-01-01"),
    ("megablox-gmm", "gmm_after_date", "over time: transpose_rhs flipped from 2027-01-01"),
    ("gpu-mha", "mha_after_date", "over time: k and v swapped from 2027-01-01"),
    ("gpu-decode", "decode_after_date", "over time: end bound dropped from 2027-01-01"),
]
