"""Adversarial implementations, round 7.

Written independently under the round's rules: without reading the earlier rounds, the
planted implementations, the findings or docs/adversarial.md / docs/kernel-ran.md, and
without running the harness on them. Each implementation below calls the real Pallas
kernel for (nearly) all of its work and is wrong in a real way, or cheats, only where the
harness's ``--profile ci`` draws are not expected to look. Each was confirmed with a
standalone script under /tmp/round7/ against a plain jnp/numpy reference.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import tempfile
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.gpu import attention as _att
from jax.experimental.pallas.ops.gpu import decode_attention as _dec
from jax.experimental.pallas.ops.gpu import layer_norm as _ln
from jax.experimental.pallas.ops.gpu import rms_norm as _rms
from jax.experimental.pallas.ops.gpu import softmax as _sm
from jax.experimental.pallas.ops.tpu.megablox import ops as _mb


def _on_accelerator() -> bool:
    """Whether the first device is an accelerator (a GPU or a TPU)."""
    return jax.devices()[0].platform != "cpu"


def _platform() -> str:
    return jax.devices()[0].platform


def _round_bf16(t: jax.Array) -> jax.Array:
    return t.astype(jnp.bfloat16).astype(t.dtype)


# ----------------------------------------------------------------------------------------
# gpu-softmax
# ----------------------------------------------------------------------------------------

_VOCAB_CAP = 262144


# confirmed (/tmp/round7/confirm_softmax.py): softmax_huge_vocab_chunked: n=262148 ramp
#   logits: max_rel_err 0.39 (n=1000: 4.9e-08)
# To catch it: trace/run rows longer than the largest claimed row (n > 262144), i.e. a
#   size past every claim, or flag shape-dependent branches in the source.
def softmax_huge_vocab_chunked(x, *, axis=-1, interpret=False):
    """Rows longer than 256k logits are split in two halves, each half softmaxed by the
    kernel on its own and the halves averaged (each scaled by 1/2): the cross-chunk
    normalisation is missing, so probabilities are wrong whenever the halves' masses
    differ (every real vocabulary)."""
    n = x.shape[-1]
    if n <= _VOCAB_CAP:
        return _sm.softmax(x, axis=-1, interpret=interpret)
    half = n // 2
    a = _sm.softmax(x[..., :half], axis=-1, interpret=interpret)
    b = _sm.softmax(x[..., half:], axis=-1, interpret=interpret)
    return (jnp.concatenate([a, b], axis=-1) * 0.5).astype(x.dtype)


# confirmed (/tmp/round7/confirm_softmax.py): softmax_big_arrays_in_bf16: x=(64, 65537)
#   float32: max_rel_err 0.011 (x=(4, 1000) float32: 5.7e-08)
# To catch it: run a float32/float16 case above 2^22 elements (between the ci caps and
#   the claims nothing is that big in a wide dtype), or diff the jaxpr's casts per size.
def softmax_big_arrays_in_bf16(x, *, axis=-1, interpret=False):
    """Arrays of more than 2^22 elements in float32/float16 are rounded to bfloat16 before
    the kernel ("to halve memory traffic"): probabilities only good to ~2^-9."""
    if x.size > 2**22 and x.dtype != jnp.bfloat16:
        return _sm.softmax(x.astype(jnp.bfloat16), axis=-1,
                           interpret=interpret).astype(x.dtype)
    return _sm.softmax(x, axis=-1, interpret=interpret)


# confirmed (/tmp/round7/confirm_softmax.py): softmax_rank5_rows_scrambled:
#   x=(2,3,2,2,16): max_rel_err 0.97 (x=(2,3,16): 8.4e-08)
# To catch it: draw 4+ leading axes (the contract says "any number of leading axes").
def softmax_rank5_rows_scrambled(x, *, axis=-1, interpret=False):
    """With 4 or more leading axes, the first two are swapped to put the "batch" inner
    and the result is reshaped (not swapped back) to x's shape: rows land on the wrong
    leading indices."""
    if x.ndim >= 5:
        y = _sm.softmax(jnp.swapaxes(x, 0, 1), axis=-1, interpret=interpret)
        return y.reshape(x.shape)
    return _sm.softmax(x, axis=-1, interpret=interpret)


# confirmed (/tmp/round7/confirm_softmax.py): softmax_axis_ignored: real kernel axis=0
#   raises NotImplementedError; this one returns, max_rel_err vs the softmax over axis 0
#   = 0.63
# To catch it: call the implementation (not only the kernel's entry point) with axis != -1
#   and require an error or the right answer.
def softmax_axis_ignored(x, *, axis=-1, interpret=False):
    """Accepts any ``axis`` and silently computes the softmax over the last axis anyway
    (the real kernel raises NotImplementedError for another axis)."""
    del axis
    return _sm.softmax(x, axis=-1, interpret=interpret)


# confirmed (/tmp/round7/confirm_softmax.py): softmax_accelerator_flush: on cpu
#   (accelerator False): 1.4e-07; forced accelerator path: 81 of 1024 probabilities
#   flushed, per-element rel err 1.0 (global 2.0e-06)
# To catch it: run on the real GPU backend, or flag branches on jax.devices()[i].platform.
def softmax_accelerator_flush(x, *, axis=-1, interpret=False):
    """On a GPU/TPU (never on the CPU the harness interprets on) probabilities below 1e-6
    are flushed to 0 "to sparsify the sampler": a tail of small probabilities vanishes."""
    return _softmax_flush(x, _on_accelerator(), interpret)


def _softmax_flush(x, flush, interpret):
    p = _sm.softmax(x, axis=-1, interpret=interpret)
    if flush:
        p = jnp.where(p < 1e-6, jnp.zeros_like(p), p)
    return p


class _ShapeKey:
    """A cache key for an array: hashed and compared by its shape only."""

    def __init__(self, x):
        self.shape, self.dtype = tuple(x.shape), x.dtype

    def __hash__(self):
        return hash(self.shape)

    def __eq__(self, other):
        return isinstance(other, _ShapeKey) and self.shape == other.shape


@functools.cache
def _softmax_program(key):
    """A softmax program for ``key``'s shape: the dtype of the first call is baked in."""
    dtype = key.dtype

    def run(x, interpret):
        return _sm.softmax(x.astype(dtype), axis=-1, interpret=interpret)
    return run


# confirmed (/tmp/round7/confirm_softmax.py): softmax_shape_cache_dtype: (4, 300)
#   bfloat16 then float32, same shape: float32 max_rel_err 4.8e-03 (a fresh float32 shape: 1.2e-07)
# To catch it: call the same shape in two dtypes within one process and compare both.
def softmax_shape_cache_dtype(x, *, axis=-1, interpret=False):
    """Caches one program per shape (functools.cache on a key hashed and compared by the
    shape only): the first call's dtype is baked in, so a later float32 call of a shape
    first seen in bfloat16 is computed in bfloat16."""
    return _softmax_program(_ShapeKey(x))(x, interpret).astype(x.dtype)


@functools.cache
def _seen_row_length(n):
    return n


# confirmed (/tmp/round7/confirm_softmax.py): softmax_after_many_shapes: before: 6.7e-08;
#   after 600+ row lengths seen: 5.9e-03
# To catch it: call the implementation with many distinct shapes in one process (hundreds),
#   or flag functools caches whose cache_info() the code reads.
def softmax_after_many_shapes(x, *, axis=-1, interpret=False):
    """A "warm server" mode: once more than 600 distinct row lengths have been seen in the
    process (counted through a functools.cache's cache_info, no global rebound), rows are
    computed in bfloat16."""
    _seen_row_length(x.shape[-1])
    if _seen_row_length.cache_info().currsize > 600:
        return _sm.softmax(x.astype(jnp.bfloat16), axis=-1,
                           interpret=interpret).astype(x.dtype)
    return _sm.softmax(x, axis=-1, interpret=interpret)


# ----------------------------------------------------------------------------------------
# gpu-norm
# ----------------------------------------------------------------------------------------

def _norm(op, x, weight, bias, eps, interpret):
    fn = _ln.layer_norm if op == "layer_norm" else _rms.rms_norm
    return fn(x, weight, bias, eps=eps, backward_pass_impl="triton", interpret=interpret)


def _norm_bf16(op, x, weight, bias, eps, interpret):
    b = jnp.bfloat16
    return _norm(op, x.astype(b), weight.astype(b), bias.astype(b), eps,
                 interpret).astype(x.dtype)


# confirmed (/tmp/round7/confirm_norm.py): norm_wide_rows_bf16: layer_norm float32
#   n=16400: out 4.2e-03 (n=1000: 8.9e-08)
# To catch it: run rows wider than the widest claimed hidden size (n > 16384).
def norm_wide_rows_bf16(op, x, weight, bias, *, eps, interpret):
    """Rows wider than 16384 features are normalised in bfloat16 (inputs rounded),
    whatever x's dtype."""
    if x.shape[-1] > 16384:
        return _norm_bf16(op, x, weight, bias, eps, interpret)
    return _norm(op, x, weight, bias, eps, interpret)


@dataclasses.dataclass(frozen=True)
class _NormConfig:
    op: str
    shape: tuple
    dtype: Any
    interpret: Any
    eps: float = dataclasses.field(compare=False)


@functools.cache
def _norm_for(cfg):
    fn = _ln.layer_norm if cfg.op == "layer_norm" else _rms.rms_norm
    return functools.partial(fn, eps=cfg.eps, backward_pass_impl="triton",
                             interpret=cfg.interpret)


# confirmed (/tmp/round7/confirm_norm.py): norm_eps_cached: (2,3,100) eps=1e-5: out 1e-07,
#   then same shape eps=0.1: out 0.055
# To catch it: call one shape twice in a process with different eps (e.g. run the
#   scale-equivariance relation on every example) and judge both.
def norm_eps_cached(op, x, weight, bias, *, eps, interpret):
    """Caches the kernel per (op, shape, dtype) with an lru_cache whose key dataclass
    leaves eps out of the comparison (field(compare=False)): the first eps seen for a
    shape is used for every later call of that shape."""
    cfg = _NormConfig(op, tuple(x.shape), x.dtype, interpret, eps)
    return _norm_for(cfg)(x, weight, bias)


# confirmed (/tmp/round7/confirm_norm.py): norm_long_batch_dweight_chunk: (1,8200,128)
#   float32 layer_norm: out 1.7e-07 dx 1.4e-07 dweight 0.026 dbias 0.029 ((1,100,128):
#   all <= 1.7e-07)
# To catch it: run more token rows than any claimed size (> 8192 rows) with gradients.
def norm_long_batch_dweight_chunk(op, x, weight, bias, *, eps, interpret):
    """More than 8192 token rows are normalised in two chunks, and the second chunk's
    weight and bias are stop_gradient'ed ("frozen" by a refactor): out and dx are right,
    dweight and dbias miss the rows past 8192."""
    a, b, n = x.shape
    rows = a * b
    if rows <= 8192:
        return _norm(op, x, weight, bias, eps, interpret)
    flat = x.reshape(1, rows, n)
    head = _norm(op, flat[:, :8192], weight, bias, eps, interpret)
    tail = _norm(op, flat[:, 8192:], jax.lax.stop_gradient(weight),
                 jax.lax.stop_gradient(bias), eps, interpret)
    return jnp.concatenate([head, tail], axis=1).reshape(x.shape)


# confirmed (/tmp/round7/confirm_norm.py): norm_accelerator_bf16: on cpu (accelerator
#   False): out 7.9e-08; forced accelerator path: out 2.7e-03
# To catch it: run on the GPU backend, or flag branches on the device platform.
def norm_accelerator_bf16(op, x, weight, bias, *, eps, interpret):
    """On a GPU/TPU, float32 inputs are normalised in bfloat16 ("memory-bound: halve the
    bytes"); on the CPU interpreter the exact path runs."""
    return _norm_maybe_fast(op, x, weight, bias, eps, interpret, _on_accelerator())


def _norm_maybe_fast(op, x, weight, bias, eps, interpret, fast):
    if fast and x.dtype == jnp.float32:
        return _norm_bf16(op, x, weight, bias, eps, interpret)
    return _norm(op, x, weight, bias, eps, interpret)


_TUNE_DIR = os.path.join(tempfile.gettempdir(), "r7_norm_autotune")


# confirmed (/tmp/round7/confirm_norm.py): norm_tuned_by_other_process: first process:
#   out 1.7e-07; with another pid's marker present: out 3.6e-03
# To catch it: check twice in fresh processes on the same machine (state across
#   processes), or flag os.makedirs/os.listdir in the source.
def norm_tuned_by_other_process(op, x, weight, bias, *, eps, interpret):
    """An "autotune cache" on disk: the first process to meet a shape records itself in a
    directory; any later process that finds another process's entry takes the "tuned"
    path, which rounds to bfloat16. A single check run is always the first process."""
    key = os.path.join(_TUNE_DIR, f"{op}-{'x'.join(map(str, x.shape))}-{x.dtype}")
    me = str(os.getpid())
    tuned = os.path.isdir(key) and any(p != me for p in os.listdir(key))
    os.makedirs(os.path.join(key, me), exist_ok=True)
    if tuned:
        return _norm_bf16(op, x, weight, bias, eps, interpret)
    return _norm(op, x, weight, bias, eps, interpret)


# confirmed (/tmp/round7/confirm_norm.py): norm_eps_zero_replaced: rms_norm rows of
#   variance 1e-6: eps=1e-5 out 8.5e-08; eps=0.0 out 0.64
# To catch it: draw eps=0 (a valid value: no regulariser), not only 1e-12..0.1.
def norm_eps_zero_replaced(op, x, weight, bias, *, eps, interpret):
    """``eps = eps or 1e-5``: a caller's eps=0.0 is silently replaced by 1e-5."""
    eps = eps or 1e-5
    return _norm(op, x, weight, bias, eps, interpret)


_norm_traces = itertools.count().__next__


# confirmed (/tmp/round7/confirm_norm.py): norm_after_many_traces: first: out 6.6e-08;
#   after 3000 traces: out 3.2e-03
# To catch it: trace the implementation many times in one process (thousands), or flag a
#   module-level counter's bound __next__ as state kept across calls.
def norm_after_many_traces(op, x, weight, bias, *, eps, interpret):
    """Counts its traces with a module-level itertools.count's bound ``__next__`` (no
    ``global``, no ``next()``); past 3000 traces it switches to bfloat16."""
    if _norm_traces() >= 3000:
        return _norm_bf16(op, x, weight, bias, eps, interpret)
    return _norm(op, x, weight, bias, eps, interpret)


# ----------------------------------------------------------------------------------------
# megablox-gmm
# ----------------------------------------------------------------------------------------

def _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset, existing_out,
         transpose_rhs, interpret):
    return _mb.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                   existing_out, transpose_rhs, interpret)


# confirmed (/tmp/round7/confirm_gmm.py): gmm_drops_existing_out: sharded (offset 1, 2
#   of 4 groups) with existing_out: computed rows 3.8e-07, rows outside the shard all
#   zero, max |mine - real gmm| 3.69 (real gmm keeps existing_out there: 3.8e-07 vs
#   numpy)
# To catch it: draw existing_out (the describe page lists it as not covered).
def gmm_drops_existing_out(lhs, rhs, group_sizes, preferred_element_type, tiling,
                           group_offset, existing_out, transpose_rhs, interpret):
    """Ignores ``existing_out``: the rows gmm does not compute (other shards' groups) come
    back zero instead of keeping the existing output's values."""
    del existing_out
    return _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset, None,
                transpose_rhs, interpret)


# confirmed (/tmp/round7/confirm_gmm.py): gmm_deep_k_bf16: float32 k=6400: out 2.6e-03
#   (k=256: 3.3e-07)
# To catch it: run a float32 contraction deeper than the claimed 6144.
def gmm_deep_k_bf16(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                    existing_out, transpose_rhs, interpret):
    """Contractions deeper than 6144 round float32 operands to bfloat16 first."""
    if lhs.shape[1] > 6144 and lhs.dtype == jnp.float32:
        lhs, rhs = _round_bf16(lhs), _round_bf16(rhs)
    return _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                existing_out, transpose_rhs, interpret)


# confirmed (/tmp/round7/confirm_gmm.py): gmm_many_groups_truncated: 66 groups: groups
#   1-64 rows 3.6e-07, rows of groups 65-66 nan (never written); 4 groups: 3.6e-07
# To catch it: draw more groups than the largest claimed expert count (> 64).
def gmm_many_groups_truncated(lhs, rhs, group_sizes, preferred_element_type, tiling,
                              group_offset, existing_out, transpose_rhs, interpret):
    """More than 64 groups: only the first 64 are computed (a fixed-size routing table);
    the rows of later groups are never written."""
    if group_sizes.shape[0] > 64 and group_offset is None:
        group_sizes, rhs = group_sizes[:64], rhs[:64]
    return _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                existing_out, transpose_rhs, interpret)


# confirmed (/tmp/round7/confirm_gmm.py): gmm_sets_global_precision: result 3.5e-07;
#   jax_default_matmul_precision before None, after 'bfloat16'
# To catch it: compare jax.config (and other global state) before and after the call.
def gmm_sets_global_precision(lhs, rhs, group_sizes, preferred_element_type, tiling,
                              group_offset, existing_out, transpose_rhs, interpret):
    """Correct itself, but sets jax's global default matmul precision to bfloat16 as a
    side effect ("the kernel is bf16 anyway"): every later matmul of the user's program
    on an accelerator runs at bfloat16 precision."""
    jax.config.update("jax_default_matmul_precision", "bfloat16")
    return _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                existing_out, transpose_rhs, interpret)


# confirmed (/tmp/round7/confirm_gmm.py): gmm_wide_n_frozen_rhs: n=16512: out 4.8e-07,
#   dlhs 0 vs real, drhs 1.0 (zero; real drhs 3.7e-07); n=128: drhs 3e-07
# To catch it: run gradients with n past the claimed 14336.
def gmm_wide_n_frozen_rhs(lhs, rhs, group_sizes, preferred_element_type, tiling,
                          group_offset, existing_out, transpose_rhs, interpret):
    """Output widths above 16384 stop the gradient of rhs (drhs silently zero): only the
    gradient is wrong."""
    n = rhs.shape[1] if transpose_rhs else rhs.shape[2]
    if n > 16384:
        rhs = jax.lax.stop_gradient(rhs)
    return _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                existing_out, transpose_rhs, interpret)


# confirmed (/tmp/round7/confirm_gmm.py): gmm_tpu_bf16_store: on cpu: 3.2e-07; forced
#   TPU path, float32 out: 3.2e-03
# To catch it: run on a TPU, or flag branches on the device platform.
def gmm_tpu_bf16_store(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                       existing_out, transpose_rhs, interpret):
    """On a TPU, a float32 result is stored through bfloat16 ("halve the HBM writes")."""
    return _gmm_store(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                      existing_out, transpose_rhs, interpret, _platform() == "tpu")


def _gmm_store(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
               existing_out, transpose_rhs, interpret, narrow):
    out = _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
               existing_out, transpose_rhs, interpret)
    return _round_bf16(out) if narrow else out


# confirmed (/tmp/round7/confirm_gmm.py): gmm_mixed_dtypes_downcast: lhs bfloat16, rhs
#   float32: 1.6e-03 (real gmm 4.7e-07); same dtypes float32: 4.7e-07
# To catch it: draw mixed operand dtypes (bfloat16 activations, float32 expert weights).
def gmm_mixed_dtypes_downcast(lhs, rhs, group_sizes, preferred_element_type, tiling,
                              group_offset, existing_out, transpose_rhs, interpret):
    """Mixed operand dtypes: rhs is cast to lhs's dtype (float32 weights rounded to
    bfloat16), while the kernel would multiply them in float32."""
    if rhs.dtype != lhs.dtype:
        rhs = rhs.astype(lhs.dtype)
    return _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                existing_out, transpose_rhs, interpret)


# ----------------------------------------------------------------------------------------
# gpu-mha
# ----------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _MhaConfig:
    shape: tuple
    dtype: Any
    causal: bool
    block_sizes: Any
    num_warps: Any
    num_stages: Any
    interpret: Any
    return_residuals: bool
    sm_scale: float = dataclasses.field(compare=False)


@functools.cache
def _mha_for(cfg):
    return functools.partial(_att.mha, sm_scale=cfg.sm_scale, causal=cfg.causal,
                             block_sizes=cfg.block_sizes, num_warps=cfg.num_warps,
                             num_stages=cfg.num_stages, interpret=cfg.interpret,
                             return_residuals=cfg.return_residuals)


# confirmed (/tmp/round7/confirm_mha.py): mha_scale_cached: (1,32,2,16) scale 0.25:
#   2.2e-07, then same shape scale 1.0: out 0.67
# To catch it: call one shape twice in a process with different sm_scale and judge both.
def mha_scale_cached(q, k, v, segment_ids, *, sm_scale, causal, block_sizes, num_warps,
                     num_stages, interpret, return_residuals=False):
    """Caches the kernel per configuration with an lru_cache whose key dataclass leaves
    sm_scale out of the comparison: the first scale seen for a configuration is reused."""
    cfg = _MhaConfig(tuple(q.shape) + tuple(k.shape), q.dtype, causal, block_sizes, num_warps,
                     num_stages, interpret, return_residuals, sm_scale)
    return _mha_for(cfg)(q, k, v, segment_ids)


def _mha(q, k, v, segment_ids, sm_scale, causal, block_sizes, num_warps, num_stages,
         interpret, return_residuals):
    return _att.mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                    block_sizes=block_sizes, num_warps=num_warps, num_stages=num_stages,
                    interpret=interpret, return_residuals=return_residuals)


# confirmed (/tmp/round7/confirm_mha.py): mha_big_batch_drops_segments: segments, batch
#   9: out 0.95 (batch 2: 1.8e-07)
# To catch it: draw batches past the largest claimed (8 rows) with segment ids.
def mha_big_batch_drops_segments(q, k, v, segment_ids, *, sm_scale, causal, block_sizes,
                                 num_warps, num_stages, interpret, return_residuals=False):
    """Batches larger than 8 rows drop the segment ids (assumed unpacked there): packed
    documents attend across their boundaries."""
    if q.shape[0] > 8:
        segment_ids = None
    return _mha(q, k, v, segment_ids, sm_scale, causal, block_sizes, num_warps, num_stages,
                interpret, return_residuals)


# confirmed (/tmp/round7/confirm_mha.py): mha_pads_odd_lengths: real kernel on length 40
#   raises ValueError; this one: out 0.10 (length 32: 3e-07)
# To catch it: call the implementation on lengths the kernel cannot tile; the implementation
#   (not only the kernel's entry) must raise or be right.
def mha_pads_odd_lengths(q, k, v, segment_ids, *, sm_scale, causal, block_sizes, num_warps,
                         num_stages, interpret, return_residuals=False):
    """"Supports" lengths that are not a multiple of 16 by zero-padding q, k, v (and the
    segment ids) to one, with 16-wide blocks, without masking the padded keys: every query
    gives the zero keys weight exp(0 - max)."""
    q_len, kv_len = q.shape[1], k.shape[1]
    if q_len % 16 == 0 and kv_len % 16 == 0:
        return _mha(q, k, v, segment_ids, sm_scale, causal, block_sizes, num_warps,
                    num_stages, interpret, return_residuals)
    pq, pk = -q_len % 16, -kv_len % 16

    def pad(t, p):
        return jnp.pad(t, ((0, 0), (0, p), (0, 0), (0, 0)))

    seg = None if segment_ids is None else jnp.pad(segment_ids, ((0, 0), (0, pk)))
    blocks = _att.BlockSizes(block_q=16, block_k=16, block_q_dkv=16, block_kv_dkv=16,
                             block_q_dq=16, block_kv_dq=16)
    res = _mha(pad(q, pq), pad(k, pk), pad(v, pk), seg, sm_scale, causal, blocks,
               num_warps, num_stages, interpret, return_residuals)
    if return_residuals:
        out, lse = res
        return out[:, :q_len], lse[..., :q_len]
    return res[:, :q_len]


# confirmed (/tmp/round7/confirm_mha.py): mha_wide_head_grads_bf16: head_dim 256 causal:
#   out 2.1e-07 dq 6.3e-03 dk 5.4e-03 dv 2.1e-03 (head_dim 64: all <= 3.7e-07)
# To catch it: run gradients at head_dim > 128 (256: Gemma-style heads).
def mha_wide_head_grads_bf16(q, k, v, segment_ids, *, sm_scale, causal, block_sizes,
                             num_warps, num_stages, interpret, return_residuals=False):
    """head_dim above 128: the forward is exact, but the gradients come from a second
    kernel call on bfloat16-rounded q, k, v (a straight-through estimator): only dq, dk,
    dv lose precision."""
    args = (sm_scale, causal, block_sizes, num_warps, num_stages, interpret)
    if q.shape[-1] <= 128 or return_residuals:
        return _mha(q, k, v, segment_ids, *args, return_residuals)
    exact = _mha(q, k, v, segment_ids, *args, False)
    fast = _mha(_round_bf16(q), _round_bf16(k), _round_bf16(v), segment_ids, *args, False)
    return jax.lax.stop_gradient(exact) + (fast - jax.lax.stop_gradient(fast))


# confirmed (/tmp/round7/confirm_mha.py): mha_many_heads_natural_lse: heads 33: out
#   1.8e-07 lse 0.31 (heads 2: lse 8.7e-08)
# To catch it: draw more heads than the largest claimed (32) with residuals.
def mha_many_heads_natural_lse(q, k, v, segment_ids, *, sm_scale, causal, block_sizes,
                               num_warps, num_stages, interpret, return_residuals=False):
    """More than 32 heads: the lse residual is returned in natural log (x ln 2), not the
    contract's log base 2."""
    res = _mha(q, k, v, segment_ids, sm_scale, causal, block_sizes, num_warps, num_stages,
               interpret, return_residuals)
    if return_residuals and q.shape[2] > 32:
        out, lse = res
        return out, lse * 0.6931471805599453
    return res


# confirmed (/tmp/round7/confirm_mha.py): mha_accelerator_causal_drops_segments: on cpu
#   (accelerator False): 6.9e-08; accelerator path (platform gpu, causal + segments):
#   0.96
# To catch it: run on the GPU backend, or flag branches on the device platform.
def mha_accelerator_causal_drops_segments(q, k, v, segment_ids, *, sm_scale, causal,
                                          block_sizes, num_warps, num_stages, interpret,
                                          return_residuals=False):
    """On a GPU/TPU, causal attention ignores the segment ids ("causal already separates
    packed documents"): on the CPU interpreter the segments are applied."""
    if causal and _on_accelerator():
        segment_ids = None
    return _mha(q, k, v, segment_ids, sm_scale, causal, block_sizes, num_warps, num_stages,
                interpret, return_residuals)


# confirmed (/tmp/round7/confirm_mha.py): mha_segment_ids_int16: ids (0, 65536): out
#   0.59 (ids (0, 1): 1.7e-07)
# To catch it: draw segment ids beyond 16 bits (document ids, hashes, positions).
def mha_segment_ids_int16(q, k, v, segment_ids, *, sm_scale, causal, block_sizes,
                          num_warps, num_stages, interpret, return_residuals=False):
    """Segment ids are narrowed to int16 ("to save bandwidth"): ids that differ by a
    multiple of 65536 collide and their documents attend to each other."""
    if segment_ids is not None:
        segment_ids = segment_ids.astype(jnp.int16).astype(jnp.int32)
    return _mha(q, k, v, segment_ids, sm_scale, causal, block_sizes, num_warps, num_stages,
                interpret, return_residuals)


# ----------------------------------------------------------------------------------------
# gpu-decode
# ----------------------------------------------------------------------------------------

def _decode(q, k, v, start_idx, kv_seq_len, entry, **kwargs):
    if entry == "mqa":
        return _dec.mqa(q, k[:, :, 0], v[:, :, 0], start_idx, kv_seq_len, **kwargs)
    return _dec.gqa(q, k, v, start_idx, kv_seq_len, **kwargs)


# confirmed (/tmp/round7/confirm_decode.py): decode_shifted_max_residual: normalized:
#   out 2.9e-07, lse 0; m - max logit = -1.0, l / real l = 2.71828
# To catch it: compare the residuals l and m each (m is the row's max logit), not only
#   their lse.
def decode_shifted_max_residual(q, k, v, start_idx, kv_seq_len, *, entry, sm_scale, block_h,
                                block_k, k_splits, num_warps, num_stages, interpret,
                                return_residuals=True, normalize_output):
    """With a normalised output, returns m - 1 and l * e: lse = m + log l is unchanged,
    but neither residual is what it claims (m is not the max logit), so a caller that
    merges or rescales with m gets wrong values."""
    out, (denom, m) = _decode(q, k, v, start_idx, kv_seq_len, entry, sm_scale=sm_scale,
                          block_h=block_h, block_k=block_k, k_splits=k_splits,
                          num_warps=num_warps, num_stages=num_stages, interpret=interpret,
                          return_residuals=True, normalize_output=normalize_output)
    if normalize_output:
        denom, m = denom * 2.718281828459045, m - 1.0
    return out, (denom, m)


# confirmed (/tmp/round7/confirm_decode.py): decode_big_batch_ignores_start: start_idx,
#   batch 33: out 0.52 (batch 2: 2.3e-07)
# To catch it: draw batches past the largest claimed (32) with key starts.
def decode_big_batch_ignores_start(q, k, v, start_idx, kv_seq_len, *, entry, sm_scale,
                                   block_h, block_k, k_splits, num_warps, num_stages,
                                   interpret, return_residuals=True, normalize_output):
    """Batches larger than 32 ignore start_idx (every key from 0 is visible)."""
    if q.shape[0] > 32:
        start_idx = None
    return _decode(q, k, v, start_idx, kv_seq_len, entry, sm_scale=sm_scale, block_h=block_h,
                   block_k=block_k, k_splits=k_splits, num_warps=num_warps,
                   num_stages=num_stages, interpret=interpret, return_residuals=True,
                   normalize_output=normalize_output)


# confirmed (/tmp/round7/confirm_decode.py): decode_wide_head_default_scale: sm_scale
#   1.0, head_dim 256: out 0.89 (head_dim 64: 1.2e-06)
# To catch it: draw head_dim > 128 with an explicit sm_scale.
def decode_wide_head_default_scale(q, k, v, start_idx, kv_seq_len, *, entry, sm_scale,
                                   block_h, block_k, k_splits, num_warps, num_stages,
                                   interpret, return_residuals=True, normalize_output):
    """head_dim above 128 drops the caller's sm_scale for the default 1/sqrt(head_dim)."""
    if q.shape[-1] > 128:
        sm_scale = None
    return _decode(q, k, v, start_idx, kv_seq_len, entry, sm_scale=sm_scale, block_h=block_h,
                   block_k=block_k, k_splits=k_splits, num_warps=num_warps,
                   num_stages=num_stages, interpret=interpret, return_residuals=True,
                   normalize_output=normalize_output)


ROUND7 = [
    ("gpu-softmax", "softmax_huge_vocab_chunked", "size past the claims: chunked, unnormalised"),
    ("gpu-softmax", "softmax_big_arrays_in_bf16", "size past the ci caps: precision loss"),
    ("gpu-softmax", "softmax_rank5_rows_scrambled", "undrawn rank: rows permuted"),
    ("gpu-softmax", "softmax_axis_ignored", "unsupported option accepted silently"),
    ("gpu-softmax", "softmax_accelerator_flush", "platform branch: wrong on GPU only"),
    ("gpu-softmax", "softmax_shape_cache_dtype", "state across calls: lru_cache key"),
    ("gpu-softmax", "softmax_after_many_shapes", "state across calls: bomb after N shapes"),
    ("gpu-norm", "norm_wide_rows_bf16", "size past the claims: precision loss"),
    ("gpu-norm", "norm_eps_cached", "state across calls: lru_cache key drops eps"),
    ("gpu-norm", "norm_long_batch_dweight_chunk", "gradients only, rows past the claims"),
    ("gpu-norm", "norm_accelerator_bf16", "platform branch: wrong on GPU only"),
    ("gpu-norm", "norm_tuned_by_other_process", "state across processes: disk marker"),
    ("gpu-norm", "norm_eps_zero_replaced", "undrawn option value: eps=0"),
    ("gpu-norm", "norm_after_many_traces", "state across calls: trace-count bomb"),
    ("megablox-gmm", "gmm_drops_existing_out", "uncovered option ignored"),
    ("megablox-gmm", "gmm_deep_k_bf16", "size past the claims: precision loss"),
    ("megablox-gmm", "gmm_many_groups_truncated", "size past the claims: groups dropped"),
    ("megablox-gmm", "gmm_sets_global_precision", "global side effect on the user's program"),
    ("megablox-gmm", "gmm_wide_n_frozen_rhs", "gradients only, size past the claims"),
    ("megablox-gmm", "gmm_tpu_bf16_store", "platform branch: wrong on TPU only"),
    ("megablox-gmm", "gmm_mixed_dtypes_downcast", "undrawn dtype combination"),
    ("gpu-mha", "mha_scale_cached", "state across calls: lru_cache key drops sm_scale"),
    ("gpu-mha", "mha_big_batch_drops_segments", "size past the claims: mask dropped"),
    ("gpu-mha", "mha_pads_odd_lengths", "unsupported shapes accepted, padded unmasked"),
    ("gpu-mha", "mha_wide_head_grads_bf16", "gradients only, head_dim past the claims"),
    ("gpu-mha", "mha_many_heads_natural_lse", "residual only, heads past the claims"),
    ("gpu-mha", "mha_accelerator_causal_drops_segments", "platform branch: wrong on GPU"),
    ("gpu-mha", "mha_segment_ids_int16", "undrawn values: segment ids past 16 bits"),
    ("gpu-decode", "decode_shifted_max_residual", "residuals wrong, their lse right"),
    ("gpu-decode", "decode_big_batch_ignores_start", "size past the claims: bound dropped"),
    ("gpu-decode", "decode_wide_head_default_scale", "head_dim past the claims: scale"),
]
