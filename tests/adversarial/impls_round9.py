"""Adversarial implementations, round 9: written independently under the round's rules.

Written without reading tests/, docs/adversarial.md, golden/ or git history; only the README,
docs/ (but adversarial.md), the package source and `kernel-harness describe` were read. Not run
through the harness: each implementation was confirmed by a standalone script under
/tmp/round9/ (CPU, Pallas interpret mode) against a plain jax.numpy reference.

Every implementation runs the family's real Pallas kernel (jax.experimental.pallas.ops: gpu
softmax, gpu layer_norm/rms_norm, tpu megablox gmm, gpu attention mha, gpu decode_attention)
with the family's call signature, and is wrong for inputs the family claims. The general
shape of the cheats:

- size triggers the drawn and large-size cases never reach but the claim covers, written so
  the traced program has the same primitive set at every size (the cheat is a static
  parameter of ops that are always there: a `where` on an iota against a cut that equals the
  full extent at the checked sizes, or a reshape/transpose permutation that is the identity
  there), and for the differentiable families single-use data flow (no cotangent fan-out,
  so the backward has no add_any);
- data triggers computed on integer operands only (group sizes, segment ids, bounds);
- an eager-only result cache (the traced path never uses it);
- a compiled-only path, selected through a helper parameter that is not named `interpret`,
  that adds no primitive and no narrowing cast to the program.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental.pallas.ops.gpu import attention as _attention
from jax.experimental.pallas.ops.gpu import decode_attention as _decode
from jax.experimental.pallas.ops.gpu import layer_norm as _layer_norm
from jax.experimental.pallas.ops.gpu import rms_norm as _rms_norm
from jax.experimental.pallas.ops.gpu import softmax as _softmax
from jax.experimental.pallas.ops.tpu.megablox import ops as _megablox

# ----------------------------------------------------------------------------------------
# shared helpers
# ----------------------------------------------------------------------------------------

#: Results of eager (concrete) calls, keyed by a fingerprint of the call.
_EAGER_RESULTS: dict = {}


def _fingerprint(tag, arrays, static):
    """A cache key from the arrays' shapes, dtypes and, for floating arrays, 16 elements
    sampled at a fixed stride (integer operands: lengths, ids, group sizes, whole), or None
    when any array is abstract (inside jit / vjp: np.asarray of a tracer raises)."""
    try:
        parts = []
        for a in arrays:
            if a is None:
                parts.append(None)
                continue
            host = np.asarray(a).reshape(-1)
            floating = np.issubdtype(host.dtype, np.floating) or host.dtype.kind == "V" \
                or "float" in str(host.dtype)
            sample = host[::max(1, host.size // 16)][:16] if floating else host
            parts.append((np.shape(a), str(host.dtype), sample.tobytes()))
    except Exception:  # noqa: BLE001 - abstract values have no host copy
        return None
    return (tag, tuple(parts), static)


def _mask_lanes_from(x, cut):
    """x with every lane (last axis) at index >= cut set to -inf (cut == n: unchanged)."""
    lane = lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 1)
    return jnp.where(lane >= cut, jnp.array(-jnp.inf, x.dtype), x)


def _interleave(a, axis, on):
    """Permutes ``axis`` (even length) as reshape(2, n/2) -> transpose -> reshape when
    ``on``; the identity reshape otherwise. Reshape/transpose only, each element used once."""
    n = a.shape[axis]
    if not on or n % 2:
        return a.reshape(a.shape)
    shape = a.shape[:axis] + (2, n // 2) + a.shape[axis + 1:]
    perm = list(range(len(shape)))
    perm[axis], perm[axis + 1] = perm[axis + 1], perm[axis]
    return a.reshape(shape).transpose(perm).reshape(a.shape)


# ----------------------------------------------------------------------------------------
# gpu-softmax: softmax(x, *, axis=-1, interpret)
# ----------------------------------------------------------------------------------------

def _softmax_cut(x, axis, interpret, cut):
    return _softmax.softmax(_mask_lanes_from(x, cut), axis=axis, interpret=interpret)


# WRONG: an MoE router over 64 or 96 experts (n in {64, 96}: never drawn, ROW_LENGTHS jumps
# from 33 to 100 and the router large sizes use n=8 and 129..256; claimed: "over 8 to 256
# experts") loses its last expert: that logit is set to -inf before the kernel, so the last
# expert gets probability 0 and the others are renormalised.
# Script (/tmp/round9/check_softmax.py): x (16, 64) float32 N(0,1): max abs err 0.033 (the
# last column returned 0; float32 tolerance 5e-6); n=100: 1.7e-8, n=128: 1.1e-8.
def softmax_router_last_expert(x, *, axis=-1, interpret=False):
    n = x.shape[-1]
    cut = n - 1 if n in (64, 96) else n
    return _softmax_cut(x, axis, interpret, cut)


_VOCABS = frozenset({50257, 50304, 49152, 65024, 100352, 102400, 128256, 151936, 152064,
                     256000})


# WRONG: rows the length of a real tokenizer's vocabulary (GPT-2's 50257, Llama-3's 128256,
# Qwen's 151936, Gemma's 256000...: inside the claimed 262144, never an exact large-size draw)
# have every logit past 32768 masked: the tail tokens get probability 0.
# Script: x (2, 50257) float32 N(0,2): max abs err 0.017; the reference puts 0.34 of each
# row's mass past logit 32768, the implementation 0; n=32000: 8.8e-10.
def softmax_vocab_tail(x, *, axis=-1, interpret=False):
    n = x.shape[-1]
    cut = 32768 if n in _VOCABS else n
    return _softmax_cut(x, axis, interpret, cut)


# WRONG: a router batch laid out [batch, tokens, experts] with more than 64 tokens (claimed
# (4, 8192, 256); the large sizes cap tokens at 64 in ci, ordinary draws at 3) returns each
# token's probabilities one token late (token i gets token i+1's row; the last token zeros).
# Script: x (2, 100, 16) float32: max abs err 0.58; x (2, 64, 16): 7.8e-8.
def softmax_router_token_shift(x, *, axis=-1, interpret=False):
    out = _softmax.softmax(x, axis=axis, interpret=interpret)
    flat = out.reshape(-1, x.shape[-1])
    rows = flat.shape[0]
    cut = 0 if (x.ndim == 3 and x.shape[1] > 64) else rows
    nxt = jnp.pad(flat[1:], ((0, 1), (0, 0)))
    row = lax.broadcasted_iota(jnp.int32, flat.shape, 0)
    return jnp.where(row >= cut, nxt, flat).reshape(out.shape)


# WRONG (state across calls, eager only): a concrete call's result is cached under the
# input's shape, dtype and 16 logits sampled at a fixed stride; a later eager call that
# agrees there (a sampling loop whose logits change elsewhere) gets the stale probabilities.
# Traced calls never touch the cache (the fingerprint needs a host copy), and the first
# eager call of any input is the kernel's own answer.
# Script: two eager calls on (4, 100) float32, the second differing except at the 16 sampled
# positions: second call max abs err 0.14 (the first call's answer); first call 9.5e-9;
# the second input under jit 6.4e-9; eager vs jit on one input: bitwise equal.
def softmax_eager_cache(x, *, axis=-1, interpret=False):
    key = _fingerprint("softmax", (x,), (axis,))
    if key is not None and key in _EAGER_RESULTS:
        return _EAGER_RESULTS[key]
    out = _softmax.softmax(x, axis=axis, interpret=interpret)
    if key is not None:
        _EAGER_RESULTS[key] = out
    return out


def _softmax_by_target(x, axis, exact, interpret):
    n = x.shape[-1]
    cut = n if exact or n <= 128 else (n // 128) * 128
    return _softmax_cut(x, axis, interpret, cut)


# WRONG (compiled only): on a compiled GPU run (interpret False) the logits of a row's last
# partial 128-lane block are masked (rows longer than 128 whose length is not a multiple of
# 128 lose their tail); in interpret mode the full row is used. The helper's parameter is
# `exact`, not `interpret`, and the compiled program adds no primitive (same where/iota).
# Script (compiled branch simulated by calling the helper with exact=False in interpret
# mode): x (3, 1000) float32: max abs err 0.0095 (lanes 896..999 zeroed); the interpret path:
# 1.9e-9.
def softmax_compiled_tail(x, *, axis=-1, interpret=False):
    return _softmax_by_target(x, axis, interpret, interpret)


# ----------------------------------------------------------------------------------------
# gpu-norm: norm(op, x, weight, bias, *, eps, interpret)
# ----------------------------------------------------------------------------------------

def _norm_kernel(op, x, weight, bias, eps, interpret):
    fn = _layer_norm.layer_norm if op == "layer_norm" else _rms_norm.rms_norm
    return fn(x, weight, bias, eps=eps, backward_pass_impl="triton", interpret=interpret)


# WRONG: more than 512 rows in a sequence (claimed x (1, 4096, 8192): a prompt of 4096
# tokens; drawn rows stop at 99, large sizes at 300) come back interleaved: the output rows
# are a reshape(2, b/2) -> transpose permutation of the right ones (token i gets another
# token's normalised row; dx likewise).
# Script (/tmp/round9/check_norm.py): layer_norm x (1, 1024, 128) float32: out max abs err
# 14 (scale 9.5), dx 14, dweight 149; (1, 300, 128): out 1.4e-6, dx 9.5e-7.
def norm_long_sequence_interleave(op, x, weight, bias, *, eps, interpret=False):
    out = _norm_kernel(op, x, weight, bias, eps, interpret)
    return _interleave(out, 1, x.shape[1] > 512)


# WRONG: a batch of several long sequences (a >= 2 and b >= 128; claimed (2, 1024, 16384)
# float32; ci draws a = 1 past 99 rows and a <= 5 only with b <= 33) is handed to the kernel in
# sequence-major order: x is read as [b, a, n] and transposed, so rows of the two sequences
# are scrambled in out, dx and (through do) dweight/dbias pairings.
# Script: rms_norm x (2, 128, 256) float32: out max abs err 12 (scale 9.6), dx 11, dweight
# 75; (1, 128, 256): out 9.5e-7.
def norm_batch_major(op, x, weight, bias, *, eps, interpret=False):
    a, b, n = x.shape
    if a >= 2 and b >= 128:
        xs = x.reshape(b, a, n).transpose(1, 0, 2)
    else:
        xs = x.reshape(a, b, n)
    return _norm_kernel(op, xs, weight, bias, eps, interpret)


# WRONG: low-precision rows wider than 5000 features (bfloat16/float16, n > 5000; claimed x
# (1, 4096, 8192) bfloat16; bfloat16 large sizes stop at n = 1024 in ci, float16 has none,
# ordinary draws stop at 5000) read weight and bias in an interleaved column order (a [2, n/2]
# transposed layout): every column is scaled and shifted by another column's parameters.
# Script: layer_norm x (1, 8, 5120) bfloat16: out max abs err 7.3 (scale 8.1), dx 7.2,
# dweight 16, dbias 17; n = 4096: out 0.0156 (one bfloat16 rounding: the unmodified kernel's,
# bitwise).
def norm_wide_param_layout(op, x, weight, bias, *, eps, interpret=False):
    on = x.dtype in (jnp.bfloat16, jnp.float16) and x.shape[-1] > 5000
    return _norm_kernel(op, x, _interleave(weight, 0, on), _interleave(bias, 0, on), eps,
                        interpret)


# WRONG (state across calls, eager only): the inference call's result is cached by shape,
# dtype, eps, op and 16 strided samples of x, weight and bias; a later eager call that
# agrees there gets the stale output (the vjp's forward, traced, is never cached).
# Script: two eager layer_norm calls on (2, 4, 128) float32, x differing except at the
# sampled positions: second call max abs err 8.2; first call 7.2e-7; under jit 7.2e-7.
def norm_eager_cache(op, x, weight, bias, *, eps, interpret=False):
    key = _fingerprint("norm", (x, weight, bias), (op, float(eps)))
    if key is not None and key in _EAGER_RESULTS:
        return _EAGER_RESULTS[key]
    out = _norm_kernel(op, x, weight, bias, eps, interpret)
    if key is not None:
        _EAGER_RESULTS[key] = out
    return out


def _norm_by_target(op, x, weight, bias, eps, exact, interpret):
    return _norm_kernel(op, x, weight, bias, eps if exact else max(eps, 1e-3), interpret)


# WRONG (compiled only): a compiled GPU run floors eps at 1e-3 (a "safe" epsilon); interpret
# mode uses the caller's eps. eps is a static argument, so the compiled program has exactly
# the same primitives. Wrong for every eps < 1e-3 (1e-5, BERT's 1e-12...).
# Script (compiled branch simulated with exact=False in interpret mode): layer_norm
# x (2, 4, 128) float32 spread 1e-2, eps 1e-5: out max abs err 4.7 (scale 6.5); spread 1:
# 2.7e-3 (float32 tolerance 1e-4); the interpret path: 9.5e-7 and 4.8e-7.
def norm_compiled_eps_floor(op, x, weight, bias, *, eps, interpret=False):
    return _norm_by_target(op, x, weight, bias, eps, interpret, interpret)


# ----------------------------------------------------------------------------------------
# megablox-gmm: gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
#                   existing_out, transpose_rhs, interpret)
# ----------------------------------------------------------------------------------------

def _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset, existing_out,
         transpose_rhs, interpret):
    return _megablox.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                         existing_out, transpose_rhs, interpret)


# WRONG: experts wider than 512 output columns (n > 512; claimed n = 14336 and 4096; drawn n
# stops at 384, every large size uses n = 128) read their columns interleaved (rhs's n axis
# through a [2, n/2] transposed layout): out's columns are permuted, dlhs pairs do with the
# wrong columns.
# Script (/tmp/round9/check_gmm.py): lhs (128, 128), rhs (2, 128, 1024) float32, groups
# (60, 68): out max abs err 72 (scale 53), dlhs 186; n = 384: out 2e-5, dlhs 3e-5.
def gmm_wide_columns(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                     tiling=(128, 128, 128), group_offset=None, existing_out=None,
                     transpose_rhs=False, interpret=False):
    axis = 1 if transpose_rhs else 2
    rhs = _interleave(rhs, axis, rhs.shape[axis] > 512)
    return _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                existing_out, transpose_rhs, interpret)


# WRONG: contractions deeper than 4096 (k > 4096; claimed k = 6144 float32; ci large sizes
# stop at 4096, ordinary draws at 384) pair lhs's k columns with rhs's rows in an
# interleaved order: out = sum_j lhs[:, p(j)] rhs[j].
# Script: lhs (128, 6144), rhs (2, 6144, 128) float32: out max abs err 441 (scale 304);
# k = 4096: 7.3e-5.
def gmm_deep_contraction(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                         tiling=(128, 128, 128), group_offset=None, existing_out=None,
                         transpose_rhs=False, interpret=False):
    lhs = _interleave(lhs, 1, lhs.shape[1] > 4096)
    return _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                existing_out, transpose_rhs, interpret)


# WRONG: with bfloat16 operands, a busy expert (a group of more than 2048 rows: a routing
# skew; claimed 32768 bfloat16 rows over 64 experts; drawn groups stop at 1536 rows, the only
# larger ones are the float32 routing-collapse case) loses its last row to the next group:
# group_sizes is edited (integer ops only) so that row is multiplied by the next expert.
# Script: bfloat16 lhs (4096, 128), rhs (2, 128, 128), groups (3000, 1096): row 2999 max
# abs err 42 (scale 62; expert 1's product), every other row 1.2e-5; the same in float32:
# 2.4e-5 everywhere; bfloat16 (2048, 2048): 1.2e-5; bfloat16 (1500, 2596), the busy expert
# last: its last row is left in no group and comes back NaN (uninitialised).
def gmm_busy_expert_row(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                        tiling=(128, 128, 128), group_offset=None, existing_out=None,
                        transpose_rhs=False, interpret=False):
    limit = 2048 if (lhs.dtype == jnp.bfloat16 and rhs.dtype == jnp.bfloat16) else 2**31 - 1
    big = (group_sizes > limit).astype(group_sizes.dtype)
    moved = jnp.pad(big[:-1], (1, 0))
    sizes = group_sizes - big + moved
    return _gmm(lhs, rhs, sizes, preferred_element_type, tiling, group_offset, existing_out,
                transpose_rhs, interpret)


# WRONG: exactly 8 bfloat16 experts (Mixtral's layer: 8 groups, bfloat16; drawn group counts
# are 1-6 and 9-16, the relations add one: at most 7 from the 1-6 draws; the only 8-group
# large size is float32) use the experts in the order 0, 4, 1, 5, 2, 6, 3, 7 (a reshape /
# transpose of rhs's group axis): group g is multiplied by another expert's weights.
# Script: bfloat16 lhs (256, 128), rhs (8, 128, 128), 8 groups of 32: out max abs err 64
# (scale 46); float32 with 8 groups: 2.2e-5; bfloat16 with 6 groups of 64: 7.9e-6.
def gmm_eight_experts(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                      tiling=(128, 128, 128), group_offset=None, existing_out=None,
                      transpose_rhs=False, interpret=False):
    on = rhs.dtype == jnp.bfloat16 and rhs.shape[0] == 8 and group_sizes.shape[0] == 8
    rhs = _interleave(rhs, 0, on)
    return _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                existing_out, transpose_rhs, interpret)


# WRONG (state across calls, eager only): a concrete forward call's product is cached by the
# operands' shapes, dtypes, 16 strided samples of each floating operand, the whole group
# sizes and the options; a later eager call that agrees there (the same routing, tokens
# changed elsewhere) gets the stale product. The family's adapter only calls gmm under
# jax.vjp (tracers), never concretely.
# Script: two eager calls, lhs (128, 128) differing except at the sampled positions, rhs
# identical: second call max abs err 64 (scale 49); first call 2e-5; under jit 1.8e-5.
def gmm_eager_cache(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                    tiling=(128, 128, 128), group_offset=None, existing_out=None,
                    transpose_rhs=False, interpret=False):
    key = _fingerprint("gmm", (lhs, rhs, group_sizes, group_offset),
                       (str(jnp.dtype(preferred_element_type)), str(tiling),
                        bool(transpose_rhs)))
    if key is not None and key in _EAGER_RESULTS:
        return _EAGER_RESULTS[key]
    out = _gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
               existing_out, transpose_rhs, interpret)
    if key is not None:
        _EAGER_RESULTS[key] = out
    return out


# ----------------------------------------------------------------------------------------
# gpu-mha: mha(q, k, v, segment_ids, *, sm_scale, causal, block_sizes, num_warps,
#              num_stages, interpret, return_residuals=False)
# ----------------------------------------------------------------------------------------

def _mha(q, k, v, segment_ids, sm_scale, causal, block_sizes, num_warps, num_stages,
         interpret, return_residuals):
    return _attention.mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                          block_sizes=block_sizes, num_warps=num_warps,
                          num_stages=num_stages, interpret=interpret,
                          return_residuals=return_residuals)


# WRONG: several heads over a long context (heads >= 4 and kv_len >= 512; claimed
# (1, 32768, 8, 128) bfloat16 and (8, 4096, 32, 128); the ci large sizes run one head at
# long contexts and 128 tokens with many heads, ordinary draws stop at 128 tokens) read v's
# heads in an interleaved order (reshape(2, H/2) -> transpose): head h weights another
# head's values.
# Script (/tmp/round9/check_mha.py): q/k/v (1, 512, 4, 64) float32: out max abs err 0.58,
# dq 0.61, dk 0.60, dv 0.57; (1, 128, 4, 64): out 3.7e-7. (2 heads: a 2-element
# reshape/transpose is the identity, hence heads >= 4.)
def mha_long_context_heads(q, k, v, segment_ids, *, sm_scale=1.0, causal=False,
                           block_sizes=None, num_warps=None, num_stages=2, interpret=False,
                           return_residuals=False):
    v = _interleave(v, 2, k.shape[1] >= 512 and v.shape[2] >= 4)
    return _mha(q, k, v, segment_ids, sm_scale, causal,
                block_sizes or _attention.BlockSizes.get_default(),
                num_warps, num_stages, interpret, return_residuals)


# WRONG: a batch of several long sequences (batch >= 2 and kv_len >= 512; claimed
# (2, 16384, 4, 64) float16 and (8, 4096, 32, 128); ci's long contexts have batch 1, its
# batches of 4 have 128 tokens) reads k and v sequence-major: [batch, len] read as
# [len, batch] and transposed, so each row attends to keys of both sequences.
# Script: (2, 512, 1, 64) float32 non-causal: out max abs err 0.42, dq 0.54, dk 0.74,
# dv 0.57; (2, 128, 1, 64): out 2.7e-7.
def mha_batch_major_kv(q, k, v, segment_ids, *, sm_scale=1.0, causal=False,
                       block_sizes=None, num_warps=None, num_stages=2, interpret=False,
                       return_residuals=False):
    b, L, h, d = k.shape
    if b >= 2 and L >= 512:
        k = k.reshape(L, b, h, d).transpose(1, 0, 2, 3)
        v = v.reshape(L, b, h, d).transpose(1, 0, 2, 3)
    return _mha(q, k, v, segment_ids, sm_scale, causal,
                block_sizes or _attention.BlockSizes.get_default(),
                num_warps, num_stages, interpret, return_residuals)


# WRONG: segment ids are bucketed modulo 1009 before the kernel (integer ops only): two
# documents whose ids differ by a multiple of 1009 (ids 5 and 1014: a packed batch labelled
# with dataset document indices) attend to each other. The drawn ids (0..3 relabelled by
# +1000/4099/2^24+1/2^30 or *128/256/65536 (+0/1/127)) never collide modulo 1009.
# Script: (1, 64, 1, 32) float32, ids 5 for tokens 0..31 and 1014 for 32..63: out max abs
# err 1.08, dq 1.17, dk 0.96; ids 0/1: 3e-7. The script also checks that ids 0..3 under every
# relabelling the strategy draws stay distinct modulo 1009.
def mha_segment_buckets(q, k, v, segment_ids, *, sm_scale=1.0, causal=False,
                        block_sizes=None, num_warps=None, num_stages=2, interpret=False,
                        return_residuals=False):
    if segment_ids is not None:
        segment_ids = segment_ids % 1009
    return _mha(q, k, v, segment_ids, sm_scale, causal,
                block_sizes or _attention.BlockSizes.get_default(),
                num_warps, num_stages, interpret, return_residuals)


# WRONG (state across calls, eager only): the forward result (out, or (out, lse)) of a
# concrete call is cached by shapes, dtypes, 16 strided samples of q, k, v, the whole
# segment ids and every option; a later eager call that agrees there gets the stale
# attention (the vjp's call, traced, is never cached).
# Script: two eager calls (1, 64, 2, 32) float32, q differing except at the 16 sampled
# positions: second call out max abs err 1.04; first call 3e-7; under jit 3e-7.
def mha_eager_cache(q, k, v, segment_ids, *, sm_scale=1.0, causal=False, block_sizes=None,
                    num_warps=None, num_stages=2, interpret=False, return_residuals=False):
    key = _fingerprint("mha", (q, k, v, segment_ids),
                       (float(sm_scale), bool(causal), bool(return_residuals),
                        repr(block_sizes), repr(num_warps), repr(num_stages)))
    if key is not None and key in _EAGER_RESULTS:
        return _EAGER_RESULTS[key]
    out = _mha(q, k, v, segment_ids, sm_scale, causal,
               block_sizes or _attention.BlockSizes.get_default(),
               num_warps, num_stages, interpret, return_residuals)
    if key is not None:
        _EAGER_RESULTS[key] = out
    return out


def _mha_by_target(q, k, v, segment_ids, sm_scale, causal, block_sizes, num_warps,
                   num_stages, exact, interpret, return_residuals):
    return _mha(q, k, v, segment_ids if exact else None, sm_scale, causal, block_sizes,
                num_warps, num_stages, interpret, return_residuals)


# WRONG (compiled only): on a compiled GPU run the segment ids are dropped (packed documents
# attend across their boundaries); interpret mode passes them. The helper's parameter is
# `exact`; dropping an operand adds no primitive and no kernel.
# Script (compiled branch simulated with exact=False in interpret mode): (1, 64, 1, 32)
# float32, ids 0 for tokens 0..31 and 1 for 32..63: out max abs err 0.89; the interpret
# path: 2.4e-7.
def mha_compiled_segments(q, k, v, segment_ids, *, sm_scale=1.0, causal=False,
                          block_sizes=None, num_warps=None, num_stages=2, interpret=False,
                          return_residuals=False):
    return _mha_by_target(q, k, v, segment_ids, sm_scale, causal,
                          block_sizes or _attention.BlockSizes.get_default(), num_warps,
                          num_stages, interpret, interpret, return_residuals)


# ----------------------------------------------------------------------------------------
# gpu-decode: decode(q, k, v, start_idx, kv_seq_len, *, entry, sm_scale, block_h, block_k,
#                    k_splits, num_warps, num_stages, interpret, return_residuals=True,
#                    normalize_output)
# ----------------------------------------------------------------------------------------

def _decode_call(q, k, v, start_idx, kv_seq_len, entry, kwargs):
    if entry == "mqa" and k.shape[2] == 1:
        return _decode.mqa(q, k[:, :, 0], v[:, :, 0], start_idx, kv_seq_len, **kwargs)
    return _decode.gqa(q, k, v, start_idx, kv_seq_len, **kwargs)


def _bounds(start_idx, kv_seq_len, batch, kv_len):
    start = (jnp.zeros((batch,), jnp.int32) if start_idx is None
             else jnp.broadcast_to(jnp.asarray(start_idx, jnp.int32), (batch,)))
    end = (jnp.full((batch,), kv_len, jnp.int32) if kv_seq_len is None
           else jnp.broadcast_to(jnp.asarray(kv_seq_len, jnp.int32), (batch,)))
    return start, end


# WRONG: caches longer than 1024 keys (claimed 131072 and 32768 keys; gpu-decode has no large
# sizes, drawn kv_len stops at 1024) are read through a 1024-key sliding window: start is
# raised to kv_seq_len - 1024, every older key is dropped (integer ops only; the window is
# the whole cache at the drawn sizes).
# Script (/tmp/round9/check_decode.py): q (2, 4, 64), k/v (2, 2048, 1, 64) float32, full
# cache, k_splits 16: out max abs err 0.11 (scale 0.11), lse 0.72 (~log 2: half the keys);
# kv_len 1024: out 1.8e-7, lse 0.
def decode_window_1024(q, k, v, start_idx, kv_seq_len, *, entry="gqa", interpret=False,
                       **kwargs):
    batch, kv_len = k.shape[0], k.shape[1]
    start, end = _bounds(start_idx, kv_seq_len, batch, kv_len)
    window = 1024 if kv_len > 1024 else kv_len
    start = jnp.maximum(start, end - window)
    return _decode_call(q, k, v, start, end, entry, dict(kwargs, interpret=interpret))


# WRONG: batches of more than 4 rows (claimed batches 8 and 32; drawn batches stop at 4)
# give row b >= 4 the cache length of row b - 1 (an off-by-one in the per-row bounds).
# Script: q (6, 4, 32), k/v (6, 64, 1, 32) float32, kv_seq_len (10, 20, 30, 40, 50, 60):
# out max abs err 0.24 (rows 4, 5), lse 0.27; batch 4: out 2.4e-7.
def decode_batch_bounds(q, k, v, start_idx, kv_seq_len, *, entry="gqa", interpret=False,
                        **kwargs):
    batch, kv_len = k.shape[0], k.shape[1]
    start, end = _bounds(start_idx, kv_seq_len, batch, kv_len)
    cut = 4 if batch > 4 else batch
    prev = jnp.pad(end[:-1], (1, 0), constant_values=kv_len)
    row = lax.broadcasted_iota(jnp.int32, end.shape, 0)
    end = jnp.where(row >= cut, prev, end)
    return _decode_call(q, k, v, start, end, entry, dict(kwargs, interpret=interpret))


# WRONG: 8 query heads per kv head (claimed q (32, 8, 64) over one kv head; drawn groups are
# 1, 3, 4, 16, 20, 32) read q's heads in an interleaved order (reshape(2, H/2) ->
# transpose): out[h] is the attention of another head's query.
# Script: q (2, 8, 32), k/v (2, 64, 1, 32) float32: out max abs err 0.64, lse 0.36; 16 q
# heads over 2 kv heads: out 0.73; 4 heads per kv head: out 1.2e-7.
def decode_group8_heads(q, k, v, start_idx, kv_seq_len, *, entry="gqa", interpret=False,
                        **kwargs):
    on = q.shape[1] == 8 * k.shape[2]
    q = _interleave(q, 1, on)
    return _decode_call(q, k, v, start_idx, kv_seq_len, entry, dict(kwargs, interpret=interpret))


# WRONG (state across calls, eager only): (out, (l, m)) of a concrete call is cached by the
# shapes, dtypes, 16 strided samples of q, k, v, the whole bounds and every option; the next
# decode step whose query agrees at the sampled positions (the cache is the same between
# steps) gets the stale result.
# Script: two eager calls q (2, 4, 32), k/v (2, 64, 1, 32), q differing except at the
# sampled positions: second call out max abs err 0.60; first call 1.8e-7; under jit 2.1e-7.
def decode_eager_cache(q, k, v, start_idx, kv_seq_len, *, entry="gqa", interpret=False,
                       **kwargs):
    static = (entry, tuple(sorted((n, str(val)) for n, val in kwargs.items())))
    key = _fingerprint("decode", (q, k, v, start_idx, kv_seq_len), static)
    if key is not None and key in _EAGER_RESULTS:
        return _EAGER_RESULTS[key]
    out = _decode_call(q, k, v, start_idx, kv_seq_len, entry, dict(kwargs, interpret=interpret))
    if key is not None:
        _EAGER_RESULTS[key] = out
    return out


def _decode_by_target(q, k, v, start_idx, kv_seq_len, entry, kwargs, exact, interpret):
    batch, kv_len = k.shape[0], k.shape[1]
    start, end = _bounds(start_idx, kv_seq_len, batch, kv_len)
    start = start * (1 if exact else 0)
    return _decode_call(q, k, v, start, end, entry, dict(kwargs, interpret=interpret))


# WRONG (compiled only): a compiled GPU run ignores start_idx (every row reads from key 0);
# interpret mode honours it. The helper's parameter is `exact`; the compiled program has the
# same primitives (one integer multiply by 1 or 0).
# Script (compiled branch simulated with exact=False in interpret mode): q (2, 4, 32),
# k/v (2, 64, 1, 32) float32, start_idx (16, 40): out max abs err 0.82, lse 1.24; the
# interpret path: out 5.4e-7.
def decode_compiled_starts(q, k, v, start_idx, kv_seq_len, *, entry="gqa", interpret=False,
                           **kwargs):
    return _decode_by_target(q, k, v, start_idx, kv_seq_len, entry, kwargs, interpret,
                             interpret)


ROUND9 = [
    ("gpu-softmax", "softmax_router_last_expert",
     "wrong at claimed sizes never drawn: n in {64, 96} (router experts) drops the last "
     "expert"),
    ("gpu-softmax", "softmax_vocab_tail",
     "wrong at claimed sizes never drawn: real vocabulary lengths (50257, 128256, ...) mask "
     "every logit past 32768"),
    ("gpu-softmax", "softmax_router_token_shift",
     "wrong at claimed sizes never drawn: [batch, >64 tokens, experts] rows shifted by one "
     "token"),
    ("gpu-softmax", "softmax_eager_cache",
     "state across calls / eager vs traced: eager results cached by 16 sampled logits"),
    ("gpu-softmax", "softmax_compiled_tail",
     "compiled vs interpreted: compiled run masks a row's partial last 128-lane block"),
    ("gpu-norm", "norm_long_sequence_interleave",
     "wrong at claimed sizes never drawn: > 512 rows come back interleaved"),
    ("gpu-norm", "norm_batch_major",
     "wrong at claimed sizes never drawn: batch >= 2 of >= 128 rows read sequence-major"),
    ("gpu-norm", "norm_wide_param_layout",
     "wrong at claimed sizes never drawn: bfloat16/float16 rows > 5000 wide read weight and "
     "bias interleaved"),
    ("gpu-norm", "norm_eager_cache",
     "state across calls / eager vs traced: eager results cached by 16 sampled elements"),
    ("gpu-norm", "norm_compiled_eps_floor",
     "compiled vs interpreted: compiled run floors eps at 1e-3"),
    ("megablox-gmm", "gmm_wide_columns",
     "wrong at claimed sizes never drawn: n > 512 columns read interleaved"),
    ("megablox-gmm", "gmm_deep_contraction",
     "wrong at claimed sizes never drawn: k > 4096 contraction pairs permuted k columns"),
    ("megablox-gmm", "gmm_busy_expert_row",
     "wrong for claimed values never drawn: bfloat16 group > 2048 rows loses a row to the "
     "next expert"),
    ("megablox-gmm", "gmm_eight_experts",
     "wrong at a claimed configuration never drawn: exactly 8 bfloat16 experts permuted"),
    ("megablox-gmm", "gmm_eager_cache",
     "state across calls / eager vs traced: eager products cached by sampled elements"),
    ("gpu-mha", "mha_long_context_heads",
     "wrong at claimed sizes never drawn: >= 4 heads at >= 512 tokens read v heads "
     "interleaved"),
    ("gpu-mha", "mha_batch_major_kv",
     "wrong at claimed sizes never drawn: batch >= 2 at >= 512 tokens reads k/v "
     "sequence-major"),
    ("gpu-mha", "mha_segment_buckets",
     "wrong for claimed values never drawn: segment ids bucketed modulo 1009"),
    ("gpu-mha", "mha_eager_cache",
     "state across calls / eager vs traced: eager attention cached by sampled elements"),
    ("gpu-mha", "mha_compiled_segments",
     "compiled vs interpreted: compiled run drops segment ids"),
    ("gpu-decode", "decode_window_1024",
     "wrong at claimed sizes never run: caches > 1024 keys read through a 1024-key window"),
    ("gpu-decode", "decode_batch_bounds",
     "wrong at claimed sizes never drawn: batch > 4 rows take the previous row's length"),
    ("gpu-decode", "decode_group8_heads",
     "wrong at a claimed configuration never drawn: 8 query heads per kv head permuted"),
    ("gpu-decode", "decode_eager_cache",
     "state across calls / eager vs traced: eager decode results cached by sampled elements"),
    ("gpu-decode", "decode_compiled_starts",
     "compiled vs interpreted: compiled run ignores start_idx"),
]
