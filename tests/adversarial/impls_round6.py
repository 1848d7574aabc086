"""Round 6 of the adversarial set: implementations that are wrong (or cheat) in a real way,
each written to pass ``kernel-harness check FAMILY --impl
tests.adversarial.impls_round6:NAME --profile ci``.

Written independently (without reading docs/adversarial.md, earlier rounds, the cheat
catalog or the mutants), from the README, docs, the package source and ``kernel-harness
describe``. Each implementation was confirmed wrong (or its cheat present) by a standalone
script under /tmp/round6/ that compares it with a plain jnp/numpy reference; it was never
run against the harness. The comment above each function says what its script printed and
where the harness would have to look to catch it.
"""

from __future__ import annotations

import os
import sys
import tempfile
import uuid

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas.ops.gpu import attention as _attention
from jax.experimental.pallas.ops.gpu import decode_attention as _decode
from jax.experimental.pallas.ops.gpu import layer_norm as _layer_norm
from jax.experimental.pallas.ops.gpu import rms_norm as _rms_norm
from jax.experimental.pallas.ops.gpu import softmax as _softmax
from jax.experimental.pallas.ops.tpu.megablox import ops as _megablox

# --------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------


def _jax_softmax(x, interpret):
    return _softmax.softmax(x, axis=-1, interpret=interpret)


def _jax_norm(op, x, weight, bias, eps, interpret):
    fn = _layer_norm.layer_norm if op == "layer_norm" else _rms_norm.rms_norm
    return fn(x, weight, bias, eps=eps, backward_pass_impl="triton", interpret=interpret)


def _jax_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
             existing_out, transpose_rhs, interpret):
    return _megablox.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                         existing_out, transpose_rhs, interpret)


def _rows(x):
    n = 1
    for d in x.shape[:-1]:
        n *= d
    return n


def _to_bf16_grid(x):
    """x rounded to bfloat16's mantissa, kept in x's dtype (a cast, no arithmetic)."""
    return jax.lax.reduce_precision(x, exponent_bits=8, mantissa_bits=7)


# ======================================================================================
# gpu-softmax: softmax(x, *, axis=-1, interpret)
# ======================================================================================

# confirmed (/tmp/round6/s_clamp.py): rows at 2e5 + N(0,1): max abs err 0.109 (clamped rows
# near uniform); N(0,30) rows 6.8e-8, N(0,1e4) rows of 1025: 1.2e-37.
# To catch it: draw logits past 1e5 (the largest drawn are ~5e4: scale 1e4 rows; finite-out
# only checks finiteness of its x32 scaled rows).
def softmax_clamps_huge_logits(x, *, axis=-1, interpret=False):
    """Clamps logits to 1e5 "so exp never overflows in a fused epilogue": every row whose
    logits pass 1e5 (unnormalized scores of a large-margin classifier, a logit-scale of
    1e4 times O(10) features) collapses towards uniform."""
    cap = jnp.asarray(1e5, x.dtype)
    return _jax_softmax(jnp.minimum(x, cap), interpret)


# confirmed (/tmp/round6/s_near_pow2.py): n=4093 float32: the last logit's probability 0
# (reference 0.434), max abs err 0.434; n=4096: 5.5e-8; n=1000: 4.7e-8.
# To catch it: row lengths just short of a power of two past 2048 (the drawn ones stop at
# 1025; large-sizes draws n from 1001 log-spaced values, none of them in [2^k - 4, 2^k)).
def softmax_drops_last_logit_near_pow2(x, *, axis=-1, interpret=False):
    """Past 2048 logits the row is loaded in the block of next_pow2(n) lanes and the tail
    mask is taken one lane short when the padding is 4 lanes or fewer (a classic off by one
    of a tail mask): the last logit is treated as masked."""
    n = x.shape[-1]
    pad = (1 << (n - 1).bit_length()) - n
    if n > 2048 and 0 < pad <= 4:
        neg = jnp.full((*x.shape[:-1], 1), -jnp.inf, x.dtype)
        x = jnp.concatenate([x[..., :-1], neg], axis=-1)
    return _jax_softmax(x, interpret)


# confirmed (/tmp/round6/s_router.py): x (512, 64): max abs err 0.671 (row 511 holds row 510's
# probabilities); x (2, 3, 64): 3.9e-8; x (600, 8): 2.0e-7.
# To catch it: many rows (>= 512) of 16-128 logits: the router's claimed sizes are 8 experts
# (all rows) or 129-256 experts (<= 128 rows on ci); the ladder traces only layout there.
def softmax_router_last_row_stale(x, *, axis=-1, interpret=False):
    """An MoE router softmax (tokens x experts) whose last row comes from a stale tile when
    there are many rows of 16-128 experts: the final token's probabilities are its
    neighbour's."""
    rows, n = _rows(x), x.shape[-1]
    out = _jax_softmax(x, interpret)
    if rows >= 512 and 16 <= n <= 128:
        flat = out.reshape(rows, n)
        flat = jnp.concatenate([flat[:-1], flat[-2:-1]], axis=0)
        out = flat.reshape(x.shape)
    return out


#: Decided once per process by Python's randomised string hash (PYTHONHASHSEED): about one
#: process in 256 gets the "fast" path.
_FAST_PATH = hash("round6-softmax-fast-path") % 256 == 0


# confirmed (/tmp/round6/s_hashseed.py): PYTHONHASHSEED 0..1499: seeds 301, 362, 440, 485, 561,
# 586, 822, 986, 994 take the fast path; at 301 float32 max rel err 4.9e-3, at 1: 5.4e-8.
# To catch it: run in many processes (every check process draws its own hash seed, and
# each passes with probability 255/256); the source reader does not look at hash().
def softmax_per_process_fast_path(x, *, axis=-1, interpret=False):
    """In about one Python process in 256 (chosen by the process's string-hash seed) the
    logits are rounded to bfloat16 before the kernel: float32 callers get bfloat16
    accuracy, in that process only."""
    if _FAST_PATH:
        x = _to_bf16_grid(x)
    return _jax_softmax(x, interpret)


def _observed() -> bool:
    mods = getattr(sys, "mod" + "ules")
    return ("kernel" + "_harness") in mods or ("hypo" + "thesis") in mods


# confirmed (/tmp/round6/s_observed.py): without the harness imported: float32 max rel err 4.9e-3
# (bfloat16-rounded logits); after `import kernel_harness`: 5.4e-8.
# To catch it: read names built at run time (getattr(sys, "mod" + "ules")), or run the
# implementation in a process that does not import the harness and compare.
def softmax_honest_when_observed(x, *, axis=-1, interpret=False):
    """Honest whenever the harness (or Hypothesis) is loaded; otherwise the logits are
    rounded to bfloat16 first. The lookup is spelled so that no line names sys.modules or
    the harness."""
    if not _observed():
        x = _to_bf16_grid(x)
    return _jax_softmax(x, interpret)


def _is_eager(x) -> bool:
    # A concrete jax.Array has addressable shards; a tracer raises on the attribute.
    try:
        _ = x.addressable_shards
    except Exception:
        return False
    return True


# confirmed (/tmp/round6/s_eager.py): eager call float32: max rel err 4.9e-3 and 35% of the
# probabilities flushed to 0; the same call under jax.jit: 5.4e-8.
# To catch it: call the implementation on concrete arrays too (every adapter of this family
# traces it under jit and the counter traces it on abstract values).
def softmax_wrong_when_eager(x, *, axis=-1, interpret=False):
    """Eager calls (a notebook, a sampling loop without jit) take a "debug" path: logits in
    bfloat16 and small probabilities flushed to 0. Traced calls are exact."""
    out = _jax_softmax(x, interpret)
    if _is_eager(x):
        out = _jax_softmax(_to_bf16_grid(x), interpret)
        out = jnp.where(out < 1e-4, jnp.zeros_like(out), out)
    return out


# --- the answer in XLA (elementwise and layout only), the core computed and cancelled ------

_LOG2E = 1.4426950408889634
_LN2_HI = 0.693145751953125  # 0x3F317200: i * _LN2_HI is exact for |i| < 2^8
_LN2_LO = 1.428606765330187e-06


def _fold(x, op):
    """Reduces the last axis (a power of two) by halving folds of an elementwise op."""
    while x.shape[-1] > 1:
        h = x.shape[-1] // 2
        x = op(x[..., :h], x[..., h:])
    return x


def _exp_from_bits(d):
    """exp(d) for d <= 0 (float32): d = i ln2 + f (Cody-Waite: ln2 in two parts, f in
    [-ln2/2, ln2/2]), a degree-8 Taylor polynomial of e^f, times 2^i from exponent bits
    (two scalings, so that subnormal results are reached)."""
    d = jnp.maximum(d, -110.0)
    i = jnp.round(d * _LOG2E)
    f = (d - i * _LN2_HI) - i * _LN2_LO
    p = jnp.ones_like(f)
    for k in range(8, 0, -1):
        p = 1.0 + p * f * (1.0 / k)
    i = i.astype(jnp.int32)
    i1 = i >> 1
    i2 = i - i1
    s1 = jax.lax.bitcast_convert_type((i1 + 127) << 23, jnp.float32)
    s2 = jax.lax.bitcast_convert_type((i2 + 127) << 23, jnp.float32)
    return p * s1 * s2


def _reciprocal(s):
    """1/s for s >= 1 by Newton from the exponent-bit guess."""
    bits = jax.lax.bitcast_convert_type(s, jnp.int32)
    r = jax.lax.bitcast_convert_type(jnp.int32(0x7EF311C3) - bits, jnp.float32)
    for _ in range(4):
        r = r * (2.0 - s * r)
    return r


def _xla_softmax_rows(x):
    """The softmax over the last axis with no measured primitive: max and sum by folds,
    exp from bits, the division by a Newton reciprocal. float32 result."""
    n = x.shape[-1]
    width = 1 << max(n - 1, 0).bit_length()
    neg = jnp.asarray(-jnp.inf, x.dtype)
    xp = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, width - n)], constant_values=neg)
    m = _fold(xp, jnp.maximum)
    d = (xp - m).astype(jnp.float32)  # x - max in the input dtype, as the kernel does
    e = jnp.where(d < -104.0, 0.0, _exp_from_bits(d))
    s = _fold(e, jnp.add)
    return (e * _reciprocal(s))[..., :n]


def _cancelled_core_kernel(x_ref, p_ref, o_ref):
    x = x_ref[...]
    m = jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp((x - m).astype(jnp.float32))
    total = jnp.sum(e, axis=-1, keepdims=True)
    # Exactly zero: e at the row max is exp(0) = 1, and a sum holding 1 is >= 1.
    zero = (jnp.max(e, axis=-1, keepdims=True) - 1.0) + jnp.minimum(total - 1.0, 0.0)
    o_ref[...] = (p_ref[...] + zero).astype(o_ref.dtype)


# confirmed (/tmp/round6/s_outside.py): float32 N(0,1) rows: max abs err 1.2e-8, worst 4.3 ulp
# (the pristine kernel's worst 4.3); rows of N(0,30): within 4 ulp of the pristine kernel
# (both flush the same 727 subnormal probabilities); bfloat16: bitwise the pristine
# kernel's; outside the kernel only add, max, mul, sub, lt, shifts, bitcasts, slices,
# reshapes; the kernel's exp perturbed as the harness perturbs it moves out by 0.375.
# To catch it: a perturbation that is not a fixed map (or several), or judge the core's
# contribution (out - out with the core's result replaced) rather than "some change".
def softmax_answer_in_xla(x, *, axis=-1, interpret=False):
    """The answer is computed in XLA outside the kernel, spelled with elementwise and layout
    primitives only; the Pallas kernel computes exp and the row sum and adds a term that
    is exactly 0 for them (and not for the harness's perturbation of them)."""
    shape = x.shape
    n = shape[-1]
    x2 = x.reshape(_rows(x), n)
    p = _xla_softmax_rows(x2)
    out = pl.pallas_call(
        _cancelled_core_kernel,
        out_shape=jax.ShapeDtypeStruct(x2.shape, x.dtype),
        interpret=interpret,
    )(x2, p)
    return out.reshape(shape)


# ======================================================================================
# gpu-norm: norm(op, x, weight, bias, *, eps, interpret)
# ======================================================================================

# confirmed (/tmp/round6/n_wide_bf16.py): bfloat16 layer_norm x (1, 8, 8192): out max abs err
# 0.283 vs the float64 reference (pristine 0.0155); x (1, 8, 1024): 0.0154, as pristine.
# To catch it: bfloat16/float16 rows past 5000 features run for real (ci: bfloat16 rows of
# 128-1024 at large sizes, <= 5000 drawn; a cast traces as layout at the claimed 8192).
def norm_wide_rows_in_fp8(op, x, weight, bias, *, eps, interpret=False):
    """For a model's hidden size (past 5000 features) in bfloat16/float16 the rows are
    quantized to fp8 (e4m3 grid) "to halve the kernel's register pressure"."""
    if x.dtype != jnp.float32 and x.shape[-1] > 5000:
        x = jax.lax.reduce_precision(x, exponent_bits=4, mantissa_bits=3)
    return _jax_norm(op, x, weight, bias, eps, interpret)


# confirmed (/tmp/round6/n_many_rows.py): float32 rms_norm x (1, 4096, 256): out max abs err 5.93
# (row 4095 is row 4094's; vs pristine dx 3.54, dweight 7.63); x (3, 33, 256): 0 vs pristine.
# To catch it: more rows than the tier caps (ci 300, nightly 2000): the claimed 4096 rows
# are traced only, and this branch is layout.
def norm_last_token_stale(op, x, weight, bias, *, eps, interpret=False):
    """Past 4000 tokens the last row's output comes from the previous row (a row grid that
    rounds the tokens down to its tile and patches the tail from a stale register)."""
    out = _jax_norm(op, x, weight, bias, eps, interpret)
    a, b, n = x.shape
    if a * b > 4000:
        flat = out.reshape(a * b, n)
        out = jnp.concatenate([flat[:-1], flat[-2:-1]], axis=0).reshape(x.shape)
    return out


# confirmed (/tmp/round6/n_clip.py): layer_norm rows 2e5 +- 1000: out max abs err 5.1;
# the drawn extreme (offset 300 x spread 30) and the same x8 (scale-equivariant): 0 vs
# pristine in out, dx, dweight, dbias.
# To catch it: activations past 1e5; the drawn ones reach ~300 x 30 = 9000 (~74000 once
# scale-equivariant multiplies them by 8), and finite-out only checks finiteness.
def norm_clips_activations(op, x, weight, bias, *, eps, interpret=False):
    """Clips activations to +-1e5 "for fp8-scaled inputs" before normalizing: rows past
    1e5 (an un-normalized residual stream deep in a model) are normalized wrongly."""
    cap = jnp.asarray(1e5, x.dtype)
    return _jax_norm(op, jnp.clip(x, -cap, cap), weight, bias, eps, interpret)


def _dweight_bf16_for_many_rows(op, eps, interpret, rows_limit):
    @jax.custom_vjp
    def f(x, weight, bias):
        return _jax_norm(op, x, weight, bias, eps, interpret)

    def fwd(x, weight, bias):
        return f(x, weight, bias), (x, weight, bias)

    def bwd(res, g):
        x, weight, bias = res
        _, vjp = jax.vjp(lambda a, w, b: _jax_norm(op, a, w, b, eps, interpret),
                         x, weight, bias)
        dx, dw, db = vjp(g)
        if x.shape[0] * x.shape[1] > rows_limit:
            dw, db = _to_bf16_grid(dw), _to_bf16_grid(db)
        return dx, dw, db

    f.defvjp(fwd, bwd)
    return f


# confirmed (/tmp/round6/n_dweight.py): float32 layer_norm x (1, 2304, 512): dweight max rel
# err 2.6e-3 vs pristine (out, dx 0); x (1, 256, 512): 0 in every output.
# To catch it: float32 gradients over more than 2048 rows (ci caps rows at 300, nightly at
# 2 x 1000); float32's dweight tolerance would see it at once.
def norm_dweight_bf16_over_2048_rows(op, x, weight, bias, *, eps, interpret=False):
    """dweight and dbias (sums over every token) rounded to bfloat16 once there are more
    than 2048 tokens; the forward and dx stay float32."""
    return _dweight_bf16_for_many_rows(op, eps, interpret, 2048)(x, weight, bias)


# confirmed (/tmp/round6/n_second_block.py): float32 layer_norm n=4544 (Falcon-7B's hidden size):
# out max abs err 4.4; n=4097 and n=5000: 0 vs pristine.
# To catch it: row lengths between the drawn 4097 and 5000 (and 5001+ run only in float32
# at large sizes); the weight gather is layout at every claimed size.
def norm_second_block_weight_not_advanced(op, x, weight, bias, *, eps, interpret=False):
    """The second 4096-column block re-reads the first block's weight and bias (the
    pointer is not advanced) for row lengths strictly between 4097 and 5000."""
    n = x.shape[-1]
    if 4097 < n < 5000:
        weight = jnp.concatenate([weight[:4096], weight[: n - 4096]])
        bias = jnp.concatenate([bias[:4096], bias[: n - 4096]])
    return _jax_norm(op, x, weight, bias, eps, interpret)


_COUNTER = os.path.join(tempfile.gettempdir(), "round6-norm-autotune.log")
#: Traces after which the "autotuned" fast path is taken (persists across processes).
_TUNED_AFTER = 20000


def _tuned() -> bool:
    with open(_COUNTER, "a") as log:
        log.write(".")
    return os.path.getsize(_COUNTER) > _TUNED_AFTER


# confirmed (/tmp/round6/n_counter.py): fresh log: float32 out max abs err 6.5e-7; log at
# 20001 bytes: 9.1e-3 (bfloat16-rounded rows).
# To catch it: a counter kept in a file (append, then the file's size) is not an augmented
# assignment; the harness would have to flag file writes or rerun far past 20000 traces.
def norm_autotune_log_bomb(op, x, weight, bias, *, eps, interpret=False):
    """Each trace appends to an "autotuning log" in the temp dir; once the log holds 20000
    entries (over every process on the machine) the "tuned" path rounds x to bfloat16."""
    if _tuned():
        x = _to_bf16_grid(x)
    return _jax_norm(op, x, weight, bias, eps, interpret)


#: 2027-03-01 00:00 UTC in uuid1's clock (100 ns ticks since 1582-10-15).
_SWITCH_TICKS = (1803945600 + 12219292800) * 10_000_000


def _past_switch(ticks=None) -> bool:
    return (uuid.uuid1().time if ticks is None else ticks) > _SWITCH_TICKS


# confirmed (/tmp/round6/n_clock.py): today (uuid1 clock 2026-12): float32 out max abs err
# 6.5e-7; with the clock past 2027-03-01: 9.1e-3 (bfloat16-rounded rows).
# To catch it: the clock read through uuid.uuid1().time (not time/datetime); the harness
# would have to list uuid1 (and os.stat times, ...) among the clocks, or run with a faked
# date.
def norm_uuid_clock_bomb(op, x, weight, bias, *, eps, interpret=False):
    """Exact until 2027-03-01; from then on x is rounded to bfloat16. The date is read
    from uuid1's timestamp."""
    if _past_switch():
        x = _to_bf16_grid(x)
    return _jax_norm(op, x, weight, bias, eps, interpret)


# ======================================================================================
# megablox-gmm: gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
#                   existing_out, transpose_rhs, interpret)
# ======================================================================================

# confirmed (/tmp/round6/g_clip.py): lhs with one 40.0 outlier: out max abs err 5.63;
# N(0,1) lhs: 0 vs pristine in out, dlhs, drhs.
# To catch it: lhs values past 16 (the drawn lhs is N(0,1): |x| < 6); activation outliers
# of 20-100 are common in LLM MoE layers.
def gmm_clips_lhs_outliers(lhs, rhs, group_sizes, preferred_element_type, tiling,
                           group_offset, existing_out, transpose_rhs, interpret):
    """Clips the activations to +-16 "to keep the bfloat16 accumulator in range"."""
    cap = jnp.asarray(16.0, lhs.dtype)
    return _jax_gmm(jnp.clip(lhs, -cap, cap), rhs, group_sizes, preferred_element_type,
                    tiling, group_offset, existing_out, transpose_rhs, interpret)


# confirmed (/tmp/round6/g_long_k.py): bfloat16 k=2048: out max abs err 1.13 (rel 0.27: the
# last 128 of the contraction dropped); bfloat16 k=384: 5.2e-7; float32 k=2048: 2.2e-6 (as
# pristine).
# To catch it: bfloat16 with k past 1024 (ci: bfloat16 k=128 at large sizes, <= 384 drawn;
# nightly <= 1024); the slice is layout at the claimed k=4096.
def gmm_bf16_long_contraction_short(lhs, rhs, group_sizes, preferred_element_type, tiling,
                                    group_offset, existing_out, transpose_rhs, interpret):
    """bfloat16, k past 1024: the last 128-wide k tile is skipped (a k-loop bound computed
    as k // tk - 1 on the "production" path)."""
    k = lhs.shape[1]
    if lhs.dtype == jnp.bfloat16 and k > 1024:
        lhs = jnp.concatenate([lhs[:, : k - 128], jnp.zeros_like(lhs[:, k - 128:])], axis=1)
    return _jax_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                    existing_out, transpose_rhs, interpret)


# confirmed (/tmp/round6/g_many_groups.py): float32, 40 groups: out max rel err 2.9e-3
# (bfloat16 operands); 16 groups: 3.4e-7.
# To catch it: float32 with more than 32 groups (ci: float32 at large sizes has 8 groups,
# drawn ones 1-16, 17 after a group-split relation; 64 groups are drawn in bfloat16 only).
def gmm_f32_many_experts_in_bf16(lhs, rhs, group_sizes, preferred_element_type, tiling,
                                 group_offset, existing_out, transpose_rhs, interpret):
    """float32 operands rounded to bfloat16 once there are more than 32 experts."""
    if lhs.dtype == jnp.float32 and group_sizes.shape[0] > 32:
        lhs, rhs = _to_bf16_grid(lhs), _to_bf16_grid(rhs)
    return _jax_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                    existing_out, transpose_rhs, interpret)


# confirmed (/tmp/round6/g_big_group.py): one group of 4608 rows: rows 4096-4607 of out not
# finite (belong to no group), the other rows 2.2e-6; groups (1200, 336): 2.0e-6.
# To catch it: a group of more than 4096 rows (drawn m <= 1536; large sizes m=128 on ci,
# <= 1024 nightly); an integer min is not measured and is in the small program too.
def gmm_caps_busy_expert(lhs, rhs, group_sizes, preferred_element_type, tiling,
                         group_offset, existing_out, transpose_rhs, interpret):
    """Each expert's rows are capped at 4096 (a "capacity factor" applied silently): the
    rows of a busy expert past 4096 belong to no group and are never written."""
    capped = jnp.minimum(group_sizes, jnp.int32(4096))
    return _jax_gmm(lhs, rhs, capped, preferred_element_type, tiling, group_offset,
                    existing_out, transpose_rhs, interpret)


def _tpu_operands(lhs, rhs, mode):
    # The test is on this helper's parameter: bfloat16 operands when not interpreted.
    if mode is False:
        return _to_bf16_grid(lhs), _to_bf16_grid(rhs)
    return lhs, rhs


# confirmed (/tmp/round6/g_compiled.py): interpret=False (the compiled branch, executed here by
# the interpreter): float32 out max rel err 2.3e-3; interpret=True: 4.3e-7.
# To catch it: the source rule on `interpret` follows names inside one function only; the
# test here is on the helper's parameter (and the call passes interpret positionally).
def gmm_bf16_when_compiled(lhs, rhs, group_sizes, preferred_element_type, tiling,
                           group_offset, existing_out, transpose_rhs, interpret):
    """On a real TPU (interpret False) the float32 operands are rounded to bfloat16; every
    interpreted run is exact."""
    lhs, rhs = _tpu_operands(lhs, rhs, interpret)
    return _jax_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                    existing_out, transpose_rhs, interpret)


def _gmm_drhs_bf16_over(rows_limit, preferred_element_type, tiling, transpose_rhs,
                        interpret, with_offset):
    def call(lhs, rhs, group_sizes, group_offset):
        return _jax_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling,
                        group_offset if with_offset else None, None, transpose_rhs, interpret)

    @jax.custom_vjp
    def f(lhs, rhs, group_sizes, group_offset):
        return call(lhs, rhs, group_sizes, group_offset)

    def fwd(lhs, rhs, group_sizes, group_offset):
        return f(lhs, rhs, group_sizes, group_offset), (lhs, rhs, group_sizes, group_offset)

    def bwd(res, g):
        lhs, rhs, group_sizes, group_offset = res
        _, vjp = jax.vjp(lambda a, b: call(a, b, group_sizes, group_offset), lhs, rhs)
        dlhs, drhs = vjp(g)
        if lhs.shape[0] >= rows_limit:
            drhs = _to_bf16_grid(drhs)
        return dlhs, drhs, None, None

    f.defvjp(fwd, bwd)
    return f


# confirmed (/tmp/round6/g_drhs.py): float32 m=2048: drhs max rel err 2.7e-3 vs pristine
# (out, dlhs 0); m=1536: 0 in every output.
# To catch it: float32 gradients with 2048+ routed rows (drawn m <= 1536; large sizes
# m=128 on ci, <= 1024 nightly); only the backward differs, by a cast.
def gmm_drhs_bf16_many_tokens(lhs, rhs, group_sizes, preferred_element_type, tiling,
                              group_offset, existing_out, transpose_rhs, interpret):
    """The weight gradient (tgmm, a sum over every routed token) is rounded to bfloat16
    once there are 2048 or more rows; the forward and dlhs stay exact."""
    offset = jnp.int32(0) if group_offset is None else group_offset
    f = _gmm_drhs_bf16_over(2048, preferred_element_type, tiling, transpose_rhs, interpret,
                            group_offset is not None)
    return f(lhs, rhs, group_sizes, offset)


# confirmed (/tmp/round6/g_tm512.py): tiling (512, 128, 128), groups (300, 212): out max abs
# err 4.74, rows 300-307 wrong; tiling (128, 128, 128): 1.9e-6.
# To catch it: run a production row tile (tm >= 256: MaxText's 512); ci and nightly draw tm
# 8-128 and the claimed sizes' tm=512 is only traced (the same integer adds).
def gmm_boundary_rows_with_big_tiles(lhs, rhs, group_sizes, preferred_element_type, tiling,
                                     group_offset, existing_out, transpose_rhs, interpret):
    """With row tiles of 256 or more, the first group's end is pushed 8 rows into the
    second group (a boundary rounded up to the sublane count): those rows use the wrong
    expert."""
    shift = 8 if tiling[0] >= 256 else 0
    n = group_sizes.shape[0]
    if n > 1:
        move = jnp.minimum(group_sizes[1], jnp.int32(shift))
        delta = jnp.zeros((n,), jnp.int32).at[0].set(move).at[1].set(-move)
        group_sizes = group_sizes + delta
    return _jax_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                    existing_out, transpose_rhs, interpret)


# ======================================================================================
# gpu-mha: mha(q, k, v, segment_ids, *, sm_scale, causal, block_sizes, num_warps,
#              num_stages, interpret, return_residuals=False)
# ======================================================================================

def _mha(q, k, v, segment_ids, **kw):
    return _attention.mha(q, k, v, segment_ids, **kw)


def _swap_heads_past_4(t):
    h = t.shape[2]
    if h <= 4:
        return t
    return jnp.concatenate([t[:, :, :4], jnp.roll(t[:, :, 4:], 1, axis=2)], axis=2)


# confirmed (/tmp/round6/m_heads.py): 8 heads: out max abs err 1.14; 4 heads: 2.5e-7.
# To catch it: more than 4 heads (batch x heads <= 4 drawn; large sizes 1-2 heads); the
# claimed 8 heads are traced only and the roll is layout.
def mha_heads_past_4_rotated(q, k, v, segment_ids=None, *, sm_scale=1.0, causal=False,
                             block_sizes=None, num_warps=None, num_stages=2,
                             interpret=False, return_residuals=False):
    """Heads past the fourth read their queries from the neighbouring head (a head stride
    taken modulo a 4-head tile)."""
    return _mha(_swap_heads_past_4(q), k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                block_sizes=block_sizes, num_warps=num_warps, num_stages=num_stages,
                interpret=interpret, return_residuals=return_residuals)


# confirmed (/tmp/round6/m_batch.py): batch 3 with segment ids: out max abs err 1.14; batch 2:
# 3.1e-7.
# To catch it: batches of 3 or more with segment ids (max_batch 2; large sizes batch 1).
def mha_segments_of_row0_past_batch_2(q, k, v, segment_ids=None, *, sm_scale=1.0,
                                      causal=False, block_sizes=None, num_warps=None,
                                      num_stages=2, interpret=False, return_residuals=False):
    """Batch rows past the second reuse row 0's segment ids (a segment-id pointer without
    the batch stride past a 2-row tile)."""
    if segment_ids is not None and segment_ids.shape[0] > 2:
        segment_ids = jnp.concatenate(
            [segment_ids[:2], jnp.broadcast_to(segment_ids[:1], segment_ids[2:].shape)])
    return _mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                block_sizes=block_sizes, num_warps=num_warps, num_stages=num_stages,
                interpret=interpret, return_residuals=return_residuals)


# confirmed (/tmp/round6/m_long.py): kv_len 16512 non-causal (q_len 128, head_dim 16): out
# max abs err 9.5e-3; kv_len 4096: 3.8e-8.
# To catch it: contexts past 16384 tokens run for real (ci caps 4352, nightly 16384); the
# claimed 32k/64k are traced only and the roll is layout.
def mha_keys_past_16k_shifted(q, k, v, segment_ids=None, *, sm_scale=1.0, causal=False,
                              block_sizes=None, num_warps=None, num_stages=2,
                              interpret=False, return_residuals=False):
    """Past 16384 tokens the keys of the tail are read one position late (their values
    are not): a second-level KV offset off by one."""
    t = k.shape[1]
    if t > 16384:
        k = jnp.concatenate([k[:, :16384], jnp.roll(k[:, 16384:], 1, axis=1)], axis=1)
    return _mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                block_sizes=block_sizes, num_warps=num_warps, num_stages=num_stages,
                interpret=interpret, return_residuals=return_residuals)


# confirmed (/tmp/round6/m_hd16.py): head_dim 16: out max abs err 0.316; head_dim 32, 48, 64:
# <= 5.5e-7.
# To catch it: head_dim 16 (the smallest a Triton dot takes; drawn 32, 48, 64 and 64-128).
def mha_head_dim_16_drops_feature(q, k, v, segment_ids=None, *, sm_scale=1.0, causal=False,
                                  block_sizes=None, num_warps=None, num_stages=2,
                                  interpret=False, return_residuals=False):
    """For head_dim below 32 the last feature of q is dropped (a 16-wide head loaded with
    a 15-lane mask)."""
    d = q.shape[-1]
    if d < 32:
        q = jnp.concatenate([q[..., : d - 1], jnp.zeros_like(q[..., d - 1:])], axis=-1)
    return _mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                block_sizes=block_sizes, num_warps=num_warps, num_stages=num_stages,
                interpret=interpret, return_residuals=return_residuals)


# confirmed (/tmp/round6/m_scale.py): sm_scale 1/64: out max abs err 1.31; 1/sqrt(64): 5.5e-7;
# 1.0: 4.5e-6.
# To catch it: draw an sm_scale other than 1/sqrt(head_dim) and 1.0 (gpu-mha draws no
# other: scales=()).
def mha_ignores_custom_scale(q, k, v, segment_ids=None, *, sm_scale=1.0, causal=False,
                             block_sizes=None, num_warps=None, num_stages=2,
                             interpret=False, return_residuals=False):
    """Any sm_scale other than 1.0 is replaced by 1/sqrt(head_dim) (the "standard" one):
    muP's 1/d, Gemma's query_pre_attn_scalar, a temperature: all silently ignored."""
    if sm_scale != 1.0:
        sm_scale = q.shape[-1] ** -0.5
    return _mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                block_sizes=block_sizes, num_warps=num_warps, num_stages=num_stages,
                interpret=interpret, return_residuals=return_residuals)


def _dk_scaled_past_4_heads(kw):
    def call(q, k, v, segment_ids):
        return _mha(q, k, v, segment_ids, **kw)

    @jax.custom_vjp
    def f(q, k, v, segment_ids):
        return call(q, k, v, segment_ids)

    def fwd(q, k, v, segment_ids):
        return f(q, k, v, segment_ids), (q, k, v, segment_ids)

    def bwd(res, g):
        q, k, v, segment_ids = res
        _, vjp = jax.vjp(lambda a, b, c: call(a, b, c, segment_ids), q, k, v)
        dq, dk, dv = vjp(g)
        h = q.shape[2]
        factor = jnp.ones((h,), dk.dtype)
        if h > 4:
            factor = factor.at[4:].set(0.5)
        dk = dk * factor[:, None]
        return dq, dk, dv, None

    f.defvjp(fwd, bwd)
    return f


# confirmed (/tmp/round6/m_dk.py): 8 heads: dk max abs err 0.627 vs pristine (out, dq, dv 0);
# 8 heads with segment ids: dk 0.907; 4 heads: 0 in every output.
# To catch it: gradients with more than 4 heads (ci draws batch x heads <= 4, large sizes 1
# head); only the backward differs, by a multiply present at every size.
def mha_dk_halved_past_4_heads(q, k, v, segment_ids=None, *, sm_scale=1.0, causal=False,
                               block_sizes=None, num_warps=None, num_stages=2,
                               interpret=False, return_residuals=False):
    """dk of heads past the fourth is halved (a split-head backward that averages two
    partial dk tiles where it should sum them); the forward and lse are exact."""
    kw = dict(sm_scale=sm_scale, causal=causal, block_sizes=block_sizes,
              num_warps=num_warps, num_stages=num_stages, interpret=interpret)
    if return_residuals:
        return _mha(q, k, v, segment_ids, return_residuals=True, **kw)
    return _dk_scaled_past_4_heads(kw)(q, k, v, segment_ids)


def _on_accelerator() -> bool:
    return jax.devices()[0].platform in ("gpu", "cuda", "rocm")


# confirmed (/tmp/round6/m_platform.py): on the CPU: float32 out max rel err 2.7e-7; with
# jax.devices() reporting platform 'gpu': 3.5e-3 (bfloat16 q, k, v).
# To catch it: the source rule looks for jax.default_backend() and interpret; the platform
# read from jax.devices() is not; and nothing runs compiled on a GPU per push.
def mha_bf16_on_gpu(q, k, v, segment_ids=None, *, sm_scale=1.0, causal=False,
                    block_sizes=None, num_warps=None, num_stages=2, interpret=False,
                    return_residuals=False):
    """On a GPU the float32 inputs are rounded to bfloat16 ("tensor cores"); the CPU
    interpreter is exact."""
    if _on_accelerator():
        q, k, v = _to_bf16_grid(q), _to_bf16_grid(k), _to_bf16_grid(v)
    return _mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                block_sizes=block_sizes, num_warps=num_warps, num_stages=num_stages,
                interpret=interpret, return_residuals=return_residuals)


# ======================================================================================
# gpu-decode: decode(q, k, v, start_idx, kv_seq_len, *, entry, sm_scale, block_h, block_k,
#                    k_splits, num_warps, num_stages, interpret, return_residuals,
#                    normalize_output) -> (out, (l, m))
# ======================================================================================

def _decode_call(q, k, v, start_idx, kv_seq_len, entry, kwargs):
    if entry == "mqa":
        return _decode.mqa(q, k[:, :, 0], v[:, :, 0], start_idx, kv_seq_len, **kwargs)
    return _decode.gqa(q, k, v, start_idx, kv_seq_len, **kwargs)


# confirmed (/tmp/round6/d_ghost.py): kv_len 2048 with start_idx (300, 150): out max abs
# err 0.0475 (the keys before start_idx attended), lse 0.165, 0 Pallas kernels in the
# traced program; kv_len 2048 without start_idx: 1.8e-7 (the XLA reference); kv_len 512
# with start_idx: 5.6e-8 and 1 kernel.
# To catch it: gpu-decode claims no sizes, so claimed-sizes and large-sizes SKIP it and a
# branch past the drawn 512 keys is never traced; a decode context is 1k-128k keys.
def decode_ghost_past_1024_keys(q, k, v, start_idx, kv_seq_len, *, entry="gqa", **kwargs):
    """Past 1024 keys the call falls back to jax's XLA ``gqa_reference`` (no Pallas kernel)
    and forgets ``start_idx`` there (a sliding window or evicted prefix is attended)."""
    if k.shape[1] > 1024:
        sm_scale = kwargs.get("sm_scale")
        return _decode.gqa_reference(q, k, v, None, kv_seq_len, sm_scale=sm_scale,
                                     return_residuals=kwargs.get("return_residuals", False),
                                     normalize_output=kwargs.get("normalize_output", True))
    return _decode_call(q, k, v, start_idx, kv_seq_len, entry, kwargs)


# confirmed (/tmp/round6/d_gqa8.py): 16 query heads over 8 kv heads: out max abs err 0.588
# (pristine 1.4e-7), lse 0.349 (query head h reads kv head h % 8, not h // 2); 16 over 4
# and 8 over 2 kv heads: 1.0e-7, as pristine.
# To catch it: 8 or more kv heads (drawn 1, 2, 4; Llama-2-70B and Llama-3 have 8).
def decode_gqa_interleaved_past_4_kv_heads(q, k, v, start_idx, kv_seq_len, *, entry="gqa",
                                           **kwargs):
    """With 8 or more kv heads the query heads are mapped to kv heads interleaved (h % kv)
    rather than grouped (h // group): the layout of another framework's GQA."""
    b, hq, d = q.shape
    hkv = k.shape[2]
    if hkv >= 8 and hq > hkv:
        g = hq // hkv
        # Query head j * hkv + kv goes where the kernel's grouping gives it kv head kv.
        qp = q.reshape(b, g, hkv, d).transpose(0, 2, 1, 3).reshape(b, hq, d)
        out, (denom, row_max) = _decode_call(qp, k, v, start_idx, kv_seq_len, entry, kwargs)

        def back(t):
            return t.reshape(b, hkv, g, *t.shape[2:]).swapaxes(1, 2).reshape(t.shape)

        return back(out), (back(denom), back(row_max))
    return _decode_call(q, k, v, start_idx, kv_seq_len, entry, kwargs)


# confirmed (/tmp/round6/d_hd128.py): float32 head_dim 128: out max rel err 2.7e-3, lse
# 1.2e-4 (q and k in bfloat16); head_dim 64: 3.2e-7.
# To catch it: head_dim 128 (drawn 16, 32, 64; 128 is nearly every LLM's).
def decode_bf16_qk_for_head_dim_128(q, k, v, start_idx, kv_seq_len, *, entry="gqa",
                                    **kwargs):
    """For head_dim 128 and more, q and k are rounded to bfloat16 ("the tensor-core path");
    smaller heads stay exact."""
    if q.shape[-1] >= 128:
        q, k = _to_bf16_grid(q), _to_bf16_grid(k)
    return _decode_call(q, k, v, start_idx, kv_seq_len, entry, kwargs)


ROUND6 = [
    ("gpu-softmax", "softmax_clamps_huge_logits", "values never drawn: logits > 1e5"),
    ("gpu-softmax", "softmax_drops_last_logit_near_pow2", "narrow size band: n just under 2^k"),
    ("gpu-softmax", "softmax_router_last_row_stale", "shape combo: many rows of 16-128"),
    ("gpu-softmax", "softmax_per_process_fast_path", "per-process nondeterminism (hash seed)"),
    ("gpu-softmax", "softmax_honest_when_observed", "observes harness, name built at run time"),
    ("gpu-softmax", "softmax_wrong_when_eager", "eager vs traced behaviour"),
    ("gpu-softmax", "softmax_answer_in_xla", "answer in XLA, core cancelled cleverly"),
    ("gpu-norm", "norm_wide_rows_in_fp8", "lower precision at unrun sizes (bf16 n>5000)"),
    ("gpu-norm", "norm_last_token_stale", "rows past the tier caps (>4000)"),
    ("gpu-norm", "norm_clips_activations", "values never drawn: |x| > 1e4"),
    ("gpu-norm", "norm_dweight_bf16_over_2048_rows", "gradient-only, rows past caps"),
    ("gpu-norm", "norm_second_block_weight_not_advanced", "narrow size band 4097<n<5000"),
    ("gpu-norm", "norm_autotune_log_bomb", "call-count bomb kept in a file"),
    ("gpu-norm", "norm_uuid_clock_bomb", "time bomb, clock via uuid1"),
    ("megablox-gmm", "gmm_clips_lhs_outliers", "values never drawn: |lhs| > 16"),
    ("megablox-gmm", "gmm_bf16_long_contraction_short", "bf16 k > 1024 never run"),
    ("megablox-gmm", "gmm_f32_many_experts_in_bf16", "lower precision, f32 > 32 groups"),
    ("megablox-gmm", "gmm_caps_busy_expert", "group > 4096 rows never run"),
    ("megablox-gmm", "gmm_bf16_when_compiled", "compiled-only branch via helper"),
    ("megablox-gmm", "gmm_drhs_bf16_many_tokens", "gradient-only, m >= 2048"),
    ("megablox-gmm", "gmm_boundary_rows_with_big_tiles", "static config: tm >= 256"),
    ("gpu-mha", "mha_heads_past_4_rotated", "heads > 4 never run"),
    ("gpu-mha", "mha_segments_of_row0_past_batch_2", "batch > 2 with segments"),
    ("gpu-mha", "mha_keys_past_16k_shifted", "context past the nightly caps"),
    ("gpu-mha", "mha_head_dim_16_drops_feature", "head_dim 16 never drawn"),
    ("gpu-mha", "mha_ignores_custom_scale", "static argument value never drawn"),
    ("gpu-mha", "mha_dk_halved_past_4_heads", "gradient-only, heads > 4"),
    ("gpu-mha", "mha_bf16_on_gpu", "compiled-only branch via jax.devices()"),
    ("gpu-decode", "decode_ghost_past_1024_keys", "ghost XLA branch, family claims no sizes"),
    ("gpu-decode", "decode_gqa_interleaved_past_4_kv_heads", "kv_heads >= 8 never drawn"),
    ("gpu-decode", "decode_bf16_qk_for_head_dim_128", "lower precision, head_dim 128"),
]

