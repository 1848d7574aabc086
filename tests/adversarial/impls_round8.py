"""Round 8 of the adversarial set: 25 wrong or cheating implementations (5 per family:
gpu-softmax, gpu-norm, megablox-gmm, gpu-mha, gpu-decode), written independently under the
round's rules (public source, docs and ``describe`` only; no test, golden or adversarial doc
read). Each one runs the family's real Pallas kernel for its work and is wrong, for inputs
the family claims, somewhere a check may not look. Each is confirmed wrong by a standalone
script under /tmp/round8/ against a plain jnp reference.
"""

from __future__ import annotations

import functools
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental.pallas.ops.gpu import attention as _attention
from jax.experimental.pallas.ops.gpu import decode_attention as _decode
from jax.experimental.pallas.ops.gpu import layer_norm as _layer_norm
from jax.experimental.pallas.ops.gpu import rms_norm as _rms_norm
from jax.experimental.pallas.ops.gpu import softmax as _softmax
from jax.experimental.pallas.ops.tpu.megablox import ops as _gmm_ops

# --------------------------------------------------------------------------------------
# shared helpers (each a plain call of the family's kernel)
# --------------------------------------------------------------------------------------


def _kernel_softmax(x, interpret):
    return _softmax.softmax(x, axis=-1, interpret=interpret)


def _kernel_norm(op, x, weight, bias, eps, interpret):
    fn = _layer_norm.layer_norm if op == "layer_norm" else _rms_norm.rms_norm
    return fn(x, weight, bias, eps=eps, backward_pass_impl="triton", interpret=interpret)


def _kernel_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                existing_out, transpose_rhs, interpret):
    return _gmm_ops.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                        existing_out, transpose_rhs, interpret)


def _kernel_decode(q, k, v, start_idx, kv_seq_len, entry, kwargs):
    if entry == "mqa":
        return _decode.mqa(q, k[:, :, 0], v[:, :, 0], start_idx, kv_seq_len, **kwargs)
    return _decode.gqa(q, k, v, start_idx, kv_seq_len, **kwargs)


def _concrete(x) -> bool:
    """A device array has ``copy_to_host_async``; an abstract value does not (no Tracer
    class named)."""
    return hasattr(x, "copy_to_host_async")


# ======================================================================================
# gpu-softmax
# ======================================================================================

#: Rows of the second leading axis past this index come back in reverse order.
_SOFTMAX_ROW_EDGE = 520


# confirmed (/tmp/round8/s1_rows.py): x (1, 600, 16) float32, jitted: rows 0..519 bitwise
#   the kernel, rows 520..599 max abs err 0.54 vs jax.nn.softmax; x (2, 3, 100): bitwise
#   the kernel (a gather of the identity), 1.7e-7 rel of the reference.
# To catch it: a real example with more than ~520 rows on the second of two leading axes
#   (the claimed (4, 8192, 256) router batch; the nightly tier caps it at 4x512).
def softmax_rows_reversed_past_520(x, *, axis=-1, interpret=False):
    """The kernel's softmax, then, for inputs with two leading axes, the rows of the second
    leading axis past index 520 are put back in reverse order (a static ``take``, a gather
    at every size, the identity up to 520 rows). Wrong for x [a, b, n] with b > 521: inside
    the claimed (4, 8192, 256), past both tiers' caps (2x64, 4x512)."""
    out = _kernel_softmax(x, interpret)
    if x.ndim < 2:
        return out
    b = x.shape[-2]
    idx = np.arange(b)
    if x.ndim == 3 and b > _SOFTMAX_ROW_EDGE:
        idx[_SOFTMAX_ROW_EDGE:] = idx[_SOFTMAX_ROW_EDGE:][::-1]
    return jnp.take(out, jnp.asarray(idx, jnp.int32), axis=-2)


# confirmed (/tmp/round8/s2_eager.py): eager call, x (2, 2048) float32: max abs err 1.2e-3
#   (the last logit's probability 0); under jax.jit the same call is bitwise the kernel;
#   eager at x (2, 3, 100): bitwise the kernel.
# To catch it: the eager comparison on a configuration with rows longer than 1025 (the
#   large-sizes examples are never called eagerly; matches-reference draws n <= 1025).
def softmax_eager_long_rows_drop_last(x, *, axis=-1, interpret=False):
    """Called eagerly (a notebook, a loop without jit) on rows longer than 1025 logits, the
    last logit of each row is masked to -inf before the kernel; traced, it is the kernel.
    The eager test asks for ``copy_to_host_async`` (no Tracer class named). Wrong, eagerly,
    on every claimed vocabulary row (1026..262144)."""
    if _concrete(x) and x.shape[-1] > 1025:
        x = x.at[..., -1].set(-jnp.inf)
    return _kernel_softmax(x, interpret)


@functools.cache
def _shape_seen(shape, dtype):
    return None


#: Distinct (shape, dtype) configurations a process may use before the implementation
#: turns wrong (a check uses far fewer; a server with dynamic shapes passes it).
_SHAPES_BEFORE_WRONG = 1500


# confirmed (/tmp/round8/s3_shapes.py): x (2, 3, 100) float32 (logits x5): bitwise the
#   kernel at first; after 1500 other shapes registered, max abs err 6.6e-3 (rel 7.2e-3) vs
#   jax.nn.softmax.
# To catch it: state kept by functools.lru_cache (its cache_info) is not a line the source
#   check reads; a check would need to flag lru_cache/cache_info on the implementation's
#   own helpers, or run more than 1500 shapes in one process.
def softmax_wrong_after_many_shapes(x, *, axis=-1, interpret=False):
    """Counts the distinct (shape, dtype) it is called with in an ``lru_cache`` (no
    augmented assignment, no append, no global) and, once a process has seen 1500 of them
    (a serving process with dynamic batch and sequence sizes), feeds the kernel logits
    rounded to bfloat16. Honest in any check's process; wrong in a long-lived user's one
    for every float32/float16 input."""
    _shape_seen(tuple(x.shape), str(x.dtype))
    if _shape_seen.cache_info().currsize > _SHAPES_BEFORE_WRONG:
        x = x.astype(jnp.bfloat16).astype(x.dtype)
    return _kernel_softmax(x, interpret)


# confirmed (/tmp/round8/s4_masked.py): x (3, 64) float32, row 1 all finfo.min: that row NaN
#   (reference and kernel: uniform 1/64); rows with a finfo.min prefix or at the -1e9 level
#   bitwise the kernel; float16 (4, 64) rows at -5.9e4 +- 1, with finfo.min prefixes:
#   bitwise the kernel.
# To catch it: draw rows that are entirely the finite mask sentinel (finfo.min): a padded
#   query's attention row, whose softmax is uniform, never NaN.
def softmax_nan_on_fully_masked_finite_rows(x, *, axis=-1, interpret=False):
    """Maps logits equal to ``finfo(dtype).min`` (the sentinel ``jnp.where(mask, x,
    finfo.min)`` writes) to -inf before the kernel (an elementwise select). In a row with any
    ordinary logit nothing changes (exp of either is exactly 0), but a row masked entirely
    with that sentinel, whose softmax is uniform, becomes all -inf: NaN. The strategy masks
    at most all but one logit with it; its rows at a sentinel's level (-1e9, float16's
    -5.9e4) are random around it, never exactly finfo.min."""
    lowest = jnp.asarray(jnp.finfo(x.dtype).min, x.dtype)
    x = jnp.where(x == lowest, jnp.asarray(-jnp.inf, x.dtype), x)
    return _kernel_softmax(x, interpret)


def _real_vocabulary(n: int) -> bool:
    """A tokenizer's vocabulary: past 32k, a multiple of 256, not a power of two (128256,
    151936, 256000...)."""
    return n > 32768 and n % 256 == 0 and n & (n - 1) != 0


# confirmed (/tmp/round8/s5_vocab.py): x (1, 33024) float32 (= 129 x 256), logits x3: the
#   last probability 0 vs 1.1e-7 (2.7e-6 of the row max: under the fixed 5e-6, but 2^23 ulp
#   for the per-element judge); x (1, 32768), (1, 33023), (2, 3, 100): bitwise the kernel.
# To catch it: real vocabulary sizes (128256, 151936, 256000) as large-size rows; the
#   large draws sit at powers of two or 1-4 off them, or are log-uniform (1 in 256 of them
#   a multiple of 256).
def softmax_drops_last_logit_real_vocab(x, *, axis=-1, interpret=False):
    """Adds a static bias row (zeros, at every size) whose last lane is -inf when the row
    length is a real tokenizer's vocabulary (past 32k, a multiple of 256, not a power of
    two): the last token's probability is 0 and the rest renormalized. The program is the
    same add at every size; wrong only at sizes the claim covers and the draws rarely hit."""
    n = x.shape[-1]
    bias = np.zeros((n,), np.float32)
    if _real_vocabulary(n):
        bias[-1] = -np.inf
    return _kernel_softmax(x + jnp.asarray(bias, x.dtype), interpret)


# ======================================================================================
# gpu-norm
# ======================================================================================

#: Rows (x's second axis) from here on are scaled.
_NORM_ROW_EDGE = 1024


# confirmed (/tmp/round8/n1_rows.py): layer_norm x (1, 1100, 128) float32: rows < 1024 out
#   within 1.3e-7 of the reference, rows >= 1024 out rel err 1.6e-2, dx 1.6e-2, dweight
#   6e-3; x (2, 3, 128): every output within 1.1e-7.
# To catch it: real examples past 1000 rows (claimed 4096 rows of 8192 bf16 and 1024 rows of
#   16384 f32; ci caps 300 rows, nightly 1000).
def norm_rows_past_1024_scaled(op, x, weight, bias, *, eps, interpret=False):
    """The kernel's norm times a static per-row factor: 1 for rows 0..1023 of x's second
    axis, 1.016 from row 1024 on (a multiply at every size). out, dx and dweight/dbias are
    wrong for x [a, b, n] with b > 1024: inside the claimed (1, 4096, 8192) bfloat16 (the
    float32 claim's 1024 rows stay exact), past both tiers' caps (300 and 1000 rows)."""
    out = _kernel_norm(op, x, weight, bias, eps, interpret)
    scale = np.ones((x.shape[-2], 1), np.float32)
    scale[_NORM_ROW_EDGE:] = 1.016
    return out * jnp.asarray(scale, out.dtype)


# confirmed (/tmp/round8/n2_zero_weight.py): layer_norm x (2, 3, 128) float32, weight[5] = 0:
#   out bitwise the kernel, dx equal, dweight[5] = 0 vs reference -2.15 (other lanes within 1e-7).
# To catch it: draw weights with exact zeros (pruned or dead channels); random normal
#   weights and the identity affine never hold one.
def norm_no_dweight_at_zero_weight(op, x, weight, bias, *, eps, interpret=False):
    """Treats channels whose weight is exactly 0 as frozen: their weight goes through
    ``stop_gradient`` (an elementwise select), so dweight there is 0 instead of
    sum(do * xhat). The forward and dx are the kernel's; only dweight is wrong, only where a
    weight is exactly zero: values the strategy never draws."""
    weight = jnp.where(weight == 0, lax.stop_gradient(weight), weight)
    return _kernel_norm(op, x, weight, bias, eps, interpret)


#: One process in this many (by pid) computes with a bfloat16 weight.
_PID_MODULUS, _PID_BAD = 61, 17


# confirmed (/tmp/round8/n3_pid.py): with the pid test forced true, layer_norm x (2, 3, 128)
#   float32: out rel err 2.1e-3, dx 2.0e-3 (tolerance 1e-4); with it false: within 1e-7.
# To catch it: read os.getpid as a way a program differs between processes (a fleet of
#   workers: one in 61 wrong), or run the check in many processes.
def norm_bf16_weight_in_some_processes(op, x, weight, bias, *, eps, interpret=False):
    """In one process out of 61 (``os.getpid() % 61 == 17``), the weight is rounded to
    bfloat16 before the kernel: float32 and float16 results off by ~2^-9 relative. A check
    runs in one or two processes (98% honest); a fleet of training or serving workers has
    some wrong ones."""
    return _norm_pid(op, x, weight, bias, eps, interpret, os.getpid() % _PID_MODULUS == _PID_BAD)


def _norm_pid(op, x, weight, bias, eps, interpret, unlucky):
    if unlucky:
        weight = weight.astype(jnp.bfloat16).astype(weight.dtype)
    return _kernel_norm(op, x, weight, bias, eps, interpret)


# confirmed (/tmp/round8/n4_eager.py): eager, rms_norm x (1, 200, 128) float32: rows >= 128
#   out rel err 1e-2; jitted: within 1e-7; eager x (2, 3, 128): within 1e-7.
# To catch it: call the large-sizes examples (100-1000 rows) eagerly too; matches-reference
#   draws at most 99 rows, so its eager comparison never sees rows past 128.
def norm_eager_rows_past_128_scaled(op, x, weight, bias, *, eps, interpret=False):
    """Eagerly (concrete arrays) and with more than 128 rows per batch entry, rows from 128
    on are scaled by 1.01 after the kernel; traced, the kernel's output. The eager test is
    an attribute lookup (``copy_to_host_async``), no Tracer class named."""
    out = _kernel_norm(op, x, weight, bias, eps, interpret)
    if _concrete(x) and x.shape[-2] > 128:
        out = out.at[:, 128:].multiply(1.01)
    return out


# confirmed (/tmp/round8/n5_x64.py): with jax_enable_x64 on, layer_norm x (2, 3, 128) float32:
#   out rel err 9.5e-3, dx 1e-2, dweight 1e-2 (x64 off: within 1.1e-7).
# To catch it: run a check with jax_enable_x64 on (the harness records the setting but never
#   sets it), or flag reads of jax.config values in the implementation's source.
def norm_wrong_under_x64(op, x, weight, bias, *, eps, interpret=False):
    """Reads ``jax.config.jax_enable_x64`` (not a line the source check reads: only the
    matmul-precision context is) and, when a user's program enables 64-bit mode (scientific
    code does), scales the weight by 1.01: out, dx and dweight wrong for every input."""
    if jax.config.jax_enable_x64:
        weight = weight * jnp.asarray(1.01, weight.dtype)
    return _kernel_norm(op, x, weight, bias, eps, interpret)


# ======================================================================================
# megablox-gmm
# ======================================================================================

#: Output columns from here on are scaled.
_GMM_COL_EDGE = 1024


# confirmed (/tmp/round8/g1_cols.py): lhs (128, 128), rhs (2, 128, 1152) float32: columns
#   < 1024 within 4e-7 of the reference, columns >= 1024 rel err 2e-2, dlhs 6.4e-3, drhs
#   1.7e-2; n = 256: within 5e-7.
# To catch it: a real example with n past 1024 (claimed 14336 and 4096; drawn <= 384, ci
#   large 128, nightly large <= 512).
def gmm_columns_past_1024_scaled(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                                 tiling=(128, 128, 128), group_offset=None,
                                 existing_out=None, transpose_rhs=False, interpret=False):
    """The kernel's grouped matmul times a static per-column factor: 1 for columns
    0..1023, 1.02 from column 1024 on (one multiply at every size). out, dlhs and drhs are
    wrong for n > 1024: every claimed size (n of 4096 and 14336), past every tier's cap."""
    out = _kernel_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                      existing_out, transpose_rhs, interpret)
    scale = np.ones((out.shape[-1],), np.float32)
    scale[_GMM_COL_EDGE:] = 1.02
    return out * jnp.asarray(scale, out.dtype)


# confirmed (/tmp/round8/g2_zero_rows.py): lhs (128, 128) float32 with rows 3 and 70 zero:
#   out within 1e-6, drhs within 1e-6, dlhs rows 3 and 70 are 0 vs reference norm ~11.
# To catch it: draw lhs rows that are exactly zero (padding tokens routed to an expert).
def gmm_no_dlhs_for_zero_rows(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                              tiling=(128, 128, 128), group_offset=None, existing_out=None,
                              transpose_rhs=False, interpret=False):
    """Rows of lhs that are exactly zero (padding tokens) are passed through
    ``stop_gradient``: their dlhs is 0 instead of do @ rhs^T. The zero test reads lhs's
    bits as integers (an integer max over k, index arithmetic, not measured). Forward and
    drhs are the kernel's; dlhs is wrong only at all-zero rows, which normal draws never
    make."""
    bits = lax.bitcast_convert_type(lhs, jnp.int16 if lhs.dtype == jnp.bfloat16 else jnp.int32)
    magnitude = bits & jnp.asarray(0x7FFF if lhs.dtype == jnp.bfloat16 else 0x7FFFFFFF,
                                   bits.dtype)
    nonzero = jnp.max((magnitude != 0).astype(jnp.int32), axis=1, keepdims=True)
    lhs = jnp.where(nonzero == 0, lax.stop_gradient(lhs), lhs)
    return _kernel_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                       existing_out, transpose_rhs, interpret)


# confirmed (/tmp/round8/g3_pod.py): TPU_WORKER_HOSTNAMES="h0,h1", group_sizes (32, 32, 32,
#   32), rhs shard of 2 groups, group_offset 2 (eager): out rel err 1.0, dlhs 1.06, drhs 1.3
#   (the shard's rows zeroed, other rows multiplied); without the variable: within 6e-7.
# To catch it: environment reads (os.environ) in the source, or a check run with a TPU pod's
#   environment.
def gmm_offset_ignored_on_pods(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                               tiling=(128, 128, 128), group_offset=None, existing_out=None,
                               transpose_rhs=False, interpret=False):
    """On a multi-host TPU pod (``TPU_WORKER_HOSTNAMES`` lists more than one host, as the
    TPU runtime sets it), the shard offset is replaced by 0: every shard multiplies the
    rows of the first groups by its own experts and zeroes its own groups' rows. Exactly
    where expert sharding is used (a pod), wrong; on a single host, correct."""
    if group_offset is not None and "," in os.environ.get("TPU_WORKER_HOSTNAMES", ""):
        group_offset = jnp.zeros_like(group_offset)
    return _kernel_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                       existing_out, transpose_rhs, interpret)


def _operand(a, exact):
    """``a`` as given, or rounded through float8 (e4m3) and back (two casts: layout)."""
    if exact:
        return a
    return a.astype(jnp.float8_e4m3fn).astype(a.dtype)


# confirmed (/tmp/round8/g4_compiled.py): the compiled path (exact=False) run in interpret
#   mode, lhs (128, 256) rhs (2, 256, 128): float32 out rel err 3.4e-2, dlhs 4.9e-2, drhs
#   4.2e-2 (tolerance 1e-4), bfloat16 out rel err 3.5e-2 (tolerance 8e-3); interpret=True:
#   within 4e-7. Not run on a TPU (none here).
# To catch it: run the check compiled on a TPU; the compiled-backend trace sees only
#   convert_element_type (layout), and the source check does not follow interpret into a
#   helper's parameter.
def gmm_fp8_operands_when_compiled(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                                   tiling=(128, 128, 128), group_offset=None,
                                   existing_out=None, transpose_rhs=False, interpret=False):
    """Passes ``interpret`` as a helper's ``exact`` parameter: compiled (interpret False)
    the operands are rounded through float8 e4m3 and back (casts, layout primitives: the
    compiled-backend trace sees no new math); on both interpreters (True or
    InterpretParams) they are exact. Wrong for every case on a real TPU, in both dtypes,
    whatever the TPU's own float32 matmul precision."""
    lhs, rhs = _operand(lhs, interpret), _operand(rhs, interpret)
    return _kernel_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                       existing_out, transpose_rhs, interpret)


# confirmed (/tmp/round8/g5_eager.py): eager, lhs (2048, 128) float32, 2 groups: out rows
#   >= 1024 rel err 1e-2 of the reference; jitted: within 4e-7; eager m = 256: within 4e-7.
# To catch it: the eager comparison on a large-sizes example (m >= 2048 only there: the
#   routing collapse); matches-reference draws m <= 1536.
def gmm_eager_many_rows_scaled(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                               tiling=(128, 128, 128), group_offset=None, existing_out=None,
                               transpose_rhs=False, interpret=False):
    """Called eagerly with 2048 or more rows, rows from 1024 on come back scaled by 1.01;
    traced (every check's program), the kernel's output."""
    out = _kernel_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                      existing_out, transpose_rhs, interpret)
    if _concrete(lhs) and lhs.shape[0] >= 2048:
        out = out.at[1024:].multiply(1.01)
    return out


# ======================================================================================
# gpu-mha
# ======================================================================================

#: Query rows from here on are scaled.
_MHA_ROW_EDGE = 16384 + 128


# confirmed (/tmp/round8/m1_rows.py): traced at q_len 16640 (bfloat16) the scale constant
#   is 1.0 at row 16511 and 1.0234 at row 16512; run causal at q_len 256 with the edge moved
#   to 128: rows >= 128 out rel err 2e-2, dq 7.3e-3, dv 2.6e-3; with the real edge at 256
#   tokens: every output within 7e-7 of the reference.
# To catch it: real examples past 16k tokens (claimed 32k bf16 causal, 64k f32; ci caps
#   4352, nightly 16384).
def mha_rows_past_16k_scaled(q, k, v, segment_ids, sm_scale=1.0, causal=False,
                             block_sizes=None, num_warps=None, num_stages=2, interpret=False,
                             return_residuals=False):
    """The kernel's attention times a static per-query factor (1 up to query 16511, 1.02
    from there; one multiply at every size). out, dq, dk, dv wrong for contexts past 16512
    tokens: inside the claimed 32k and 64k contexts, past both tiers' caps."""
    return _mha_rows_scaled(q, k, v, segment_ids, sm_scale, causal, block_sizes, num_warps,
                            num_stages, interpret, return_residuals, _MHA_ROW_EDGE)


def _mha_rows_scaled(q, k, v, segment_ids, sm_scale, causal, block_sizes, num_warps,
                     num_stages, interpret, return_residuals, edge):
    kwargs = {} if block_sizes is None else {"block_sizes": block_sizes}
    res = _attention.mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                         num_warps=num_warps, num_stages=num_stages, interpret=interpret,
                         return_residuals=return_residuals, **kwargs)
    scale = np.ones((q.shape[1], 1, 1), np.float32)
    scale[edge:] = 1.02
    if return_residuals:
        out, lse = res
        return out * jnp.asarray(scale, out.dtype), lse
    return res * jnp.asarray(scale, res.dtype)


# confirmed (/tmp/round8/m2_negative_ids.py): q=k=v (1, 64, 2, 32) float32, segment ids
#   -1 for the first 16 tokens (padding), 0 after: out rel err 0.82, dq 1.24, dk 0.72 vs the
#   reference; ids 1/0 instead: within 3.5e-7.
# To catch it: draw negative segment ids (-1 is the usual padding id); the strategy's ids
#   are all >= 0.
def mha_negative_segment_ids_merged(q, k, v, segment_ids, sm_scale=1.0, causal=False,
                                    block_sizes=None, num_warps=None, num_stages=2,
                                    interpret=False, return_residuals=False):
    """Clamps segment ids at 0 (an integer max) before the kernel: ids are labels compared
    by equality, so a padding segment -1 merges with segment 0 (and -2 with both). Correct
    for every id the strategy draws (>= 0); wrong for packed batches padded with -1."""
    if segment_ids is not None:
        segment_ids = jnp.maximum(segment_ids, 0)
    kwargs = {} if block_sizes is None else {"block_sizes": block_sizes}
    return _attention.mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                          num_warps=num_warps, num_stages=num_stages, interpret=interpret,
                          return_residuals=return_residuals, **kwargs)


def _gpu_without_nightly_part() -> bool:
    """A GPU that is neither an H100 nor an H200 (the cards a nightly run borrows)."""
    dev = jax.devices()[0]
    kind = str(getattr(dev, "device_kind", ""))
    return dev.platform == "gpu" and "H100" not in kind and "H200" not in kind


# confirmed (/tmp/round8/m3_device.py): with the device test forced true, float32
#   q (1, 64, 2, 32): out rel err 3.6e-3, dq 5.5e-3 (float32 tolerances are ~1e-5); with it
#   false: within 3.1e-7; on this CPU the test is false.
# To catch it: a compiled run on another GPU than the one the nightly uses (A100, L4...),
#   or reading device_kind tests in the source as a branch on the platform.
def mha_bf16_on_other_gpus(q, k, v, segment_ids, sm_scale=1.0, causal=False,
                           block_sizes=None, num_warps=None, num_stages=2, interpret=False,
                           return_residuals=False):
    """On a GPU that is not an H100 or H200 (``device_kind``, which the source check leaves
    alone because jax's kernels read it), q, k and v are rounded to bfloat16 first: a
    float32/float16 attention computed at bfloat16 precision. Correct on CPUs and on the
    nightly's cards; wrong on an A100, L4, RTX..."""
    return _mha_device(q, k, v, segment_ids, sm_scale, causal, block_sizes, num_warps,
                       num_stages, interpret, return_residuals, _gpu_without_nightly_part())


def _mha_device(q, k, v, segment_ids, sm_scale, causal, block_sizes, num_warps, num_stages,
                interpret, return_residuals, other_gpu):
    if other_gpu:
        q, k, v = (a.astype(jnp.bfloat16).astype(a.dtype) for a in (q, k, v))
    kwargs = {} if block_sizes is None else {"block_sizes": block_sizes}
    return _attention.mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                          num_warps=num_warps, num_stages=num_stages, interpret=interpret,
                          return_residuals=return_residuals, **kwargs)


# confirmed (/tmp/round8/m4_eager.py): eager, head_dim 128, q (1, 64, 1, 128) float32: out
#   rel err 1e-2 (v scaled); jitted: within 7.2e-7; eager head_dim 64: within 3.8e-7.
# To catch it: the eager comparison on a head_dim above 64 (only the large-sizes examples
#   draw 80-128, and they are never called eagerly).
def mha_eager_head_dim_128(q, k, v, segment_ids, sm_scale=1.0, causal=False,
                           block_sizes=None, num_warps=None, num_stages=2, interpret=False,
                           return_residuals=False):
    """Eagerly (concrete arrays) and at head_dim > 64 (128: most models), v is scaled by
    1.01 before the kernel; traced, the kernel as is. matches-reference draws head_dim 32,
    48 and 64, so its eager comparison never takes the wrong side."""
    if _concrete(q) and q.shape[-1] > 64:
        v = v * jnp.asarray(1.01, v.dtype)
    kwargs = {} if block_sizes is None else {"block_sizes": block_sizes}
    return _attention.mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                          num_warps=num_warps, num_stages=num_stages, interpret=interpret,
                          return_residuals=return_residuals, **kwargs)


# confirmed (/tmp/round8/m5_alias.py): mha(x, x, x) with x (1, 64, 2, 32) float32: out rel
#   err 1.27 (jitted and eager), dx 1.26 vs the reference; the same values as three distinct
#   arrays: out within 2.9e-7, dq 2.8e-6.
# To catch it: pass one array as q, k and v (self-attention written plainly); the harness
#   always hands three distinct arrays (and tracers).
def mha_wrong_when_q_is_k(q, k, v, segment_ids, sm_scale=1.0, causal=False,
                          block_sizes=None, num_warps=None, num_stages=2, interpret=False,
                          return_residuals=False):
    """When the caller passes the very same array (or tracer) as q and k (self-attention:
    ``mha(x, x, x)``, under jit or not), the keys are reversed along the sequence before
    the kernel (a ``rev``, layout): logits pair query i with key n-1-j. Distinct arrays of
    equal values are fine, so every harness call is honest."""
    if q is k:
        k = k[:, ::-1]
    kwargs = {} if block_sizes is None else {"block_sizes": block_sizes}
    return _attention.mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                          num_warps=num_warps, num_stages=num_stages, interpret=interpret,
                          return_residuals=return_residuals, **kwargs)


# ======================================================================================
# gpu-decode
# ======================================================================================

#: Keys past this end index are not read.
_DECODE_KEY_EDGE = 512


def _decode_kwargs(kwargs):
    return {name: value for name, value in kwargs.items() if name != "entry"}


# confirmed (/tmp/round8/d1_keys.py): q (2, 8, 64), k/v (2, 1024, 2, 64) float32: out rel
#   err 0.71, lse off by 0.78 (keys 512..1023 ignored; 0.70 with no bounds passed); kv_len
#   512: within 6e-7.
# To catch it: a real example past 512 cached keys (claimed 32k and 128k; gpu-decode has no
#   large-sizes examples, and the claimed sizes are only traced).
def decode_keys_past_512_ignored(q, k, v, start_idx, kv_seq_len, *, entry="gqa", **kwargs):
    """The visible keys' end index is clamped at 512 (an integer min, at every size): every
    key past the 512th is ignored. The drawn caches are at most 512 keys; the claimed ones
    are 32k and 128k, traced only (same program), never run."""
    batch, kv_len = q.shape[0], k.shape[1]
    if kv_seq_len is None:
        kv_seq_len = jnp.full((batch,), kv_len, jnp.int32)
    kv_seq_len = jnp.minimum(kv_seq_len, _DECODE_KEY_EDGE)
    return _kernel_decode(q, k, v, start_idx, kv_seq_len, entry, _decode_kwargs(kwargs))


# confirmed (/tmp/round8/d2_batch.py): batch 4, per-row ends (32, 64, 100, 128) of 128 and
#   starts (0, 3, 5, 7): rows 2 and 3 out rel err 1.49 and 1.04, lse off by 1.3 (they use
#   rows 0 and 1's bounds); rows 0-1 and batch 2: within 4e-7.
# To catch it: draw batches past 2 with per-row bounds (claimed 8 and 32 rows; max_batch 2).
def decode_bounds_of_first_two_rows(q, k, v, start_idx, kv_seq_len, *, entry="gqa",
                                    **kwargs):
    """Per-row bounds are gathered with index ``b % 2`` (a gather: layout, at every size):
    row b reads the bounds of row b % 2. The strategy's batch is at most 2, where this is
    the identity; a decode batch of 8 or 32 rows (the claimed ones) gets wrong lengths."""
    batch = q.shape[0]
    rows = jnp.asarray(np.arange(batch) % 2, jnp.int32)
    if start_idx is not None and jnp.ndim(start_idx) == 1:
        start_idx = jnp.take(start_idx, rows)
    if kv_seq_len is not None and jnp.ndim(kv_seq_len) == 1:
        kv_seq_len = jnp.take(kv_seq_len, rows)
    return _kernel_decode(q, k, v, start_idx, kv_seq_len, entry, _decode_kwargs(kwargs))


# confirmed (/tmp/round8/d3_splits.py): q (2, 8, 64), k/v (2, 256, 2, 64) float32,
#   k_splits 16 (and 8): out rel err 2.2e-2, lse rel 3.3e-3; k_splits 4: within 4e-7.
# To catch it: draw k_splits 8 and 16 (16 is the kernel's default and the claimed call's).
def decode_scale_off_with_many_splits(q, k, v, start_idx, kv_seq_len, *, entry="gqa",
                                      **kwargs):
    """With 8 or more kv splits (the kernel's default is 16) the logits' scale is 1% off
    (a static float: no new primitive). The strategy draws k_splits 1, 2 or 4; every call
    a user makes with the kernel's defaults is wrong."""
    kwargs = _decode_kwargs(kwargs)
    if kwargs.get("k_splits", 16) >= 8:
        scale = kwargs.get("sm_scale")
        scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
        kwargs["sm_scale"] = scale * 1.01
    return _kernel_decode(q, k, v, start_idx, kv_seq_len, entry, kwargs)


def _harness_cache_config() -> bool:
    """The persistent-cache settings a harness run makes (entries of any size stored)."""
    return jax.config.jax_persistent_cache_min_entry_size_bytes < 0


# confirmed (/tmp/round8/d4_config.py): jax's default config (min entry size 0): out rel err
#   5e-2 (v scaled by 1.05); after jax.config.update("jax_persistent_cache_min_entry_size_
#   bytes", -1), as kernel-harness's compile cache does: within 2.8e-7.
# To catch it: flag reads of jax.config values in the source, or run a check with the
#   compile cache off / its settings at jax's defaults.
def decode_honest_under_harness_cache_config(q, k, v, start_idx, kv_seq_len, *, entry="gqa",
                                             **kwargs):
    """Observes the harness through jax's process configuration: kernel-harness's compile
    cache sets ``jax_persistent_cache_min_entry_size_bytes`` to -1 (jax's default is 0),
    which no user program does. Under that setting, the kernel as is; otherwise (a user's
    program) v is scaled by 1.05. No sys.modules, no stack, no string naming the harness."""
    if not _harness_cache_config():
        v = v * jnp.asarray(1.05, v.dtype)
    return _kernel_decode(q, k, v, start_idx, kv_seq_len, entry, _decode_kwargs(kwargs))


def _multi_gpu_host() -> bool:
    return jax.devices()[0].platform == "gpu" and jax.local_device_count() > 1


# confirmed (/tmp/round8/d5_multi_gpu.py): with the device test forced true, start bounds
#   (10, 40) of kv 128: out rel err 0.46, lse off by 0.5 (keys before start attended); forced
#   false: within 3e-7; on this CPU the test is false.
# To catch it: a compiled run on a multi-GPU host (the nightly borrows one GPU), or reading
#   device counts as a branch on the platform.
def decode_ignores_starts_on_multi_gpu_hosts(q, k, v, start_idx, kv_seq_len, *, entry="gqa",
                                             **kwargs):
    """On a GPU host with more than one device (8 x H100 serving nodes), the start bounds
    are dropped: keys before start_idx are attended. ``jax.devices()`` and
    ``local_device_count`` are not backend tests the source check reads, and the check runs
    on one device (CPU, or a single borrowed GPU)."""
    return _decode_devices(q, k, v, start_idx, kv_seq_len, entry, _decode_kwargs(kwargs),
                           _multi_gpu_host())


def _decode_devices(q, k, v, start_idx, kv_seq_len, entry, kwargs, multi):
    if multi:
        start_idx = None
    return _kernel_decode(q, k, v, start_idx, kv_seq_len, entry, kwargs)


ROUND8 = [
    ("gpu-softmax", "softmax_rows_reversed_past_520",
     "ghost by value past the caps: rows of the 2nd leading axis past 520 reversed"),
    ("gpu-softmax", "softmax_eager_long_rows_drop_last",
     "otherwise when eager: last logit masked for eager calls on rows > 1025"),
    ("gpu-softmax", "softmax_wrong_after_many_shapes",
     "keeps state (lru_cache): bfloat16 logits after 1500 distinct shapes in a process"),
    ("gpu-softmax", "softmax_nan_on_fully_masked_finite_rows",
     "values never drawn: a row masked entirely with finfo.min comes back NaN"),
    ("gpu-softmax", "softmax_drops_last_logit_real_vocab",
     "sizes rarely drawn: last token dropped at real vocabulary sizes (k x 256 past 32k)"),
    ("gpu-norm", "norm_rows_past_1024_scaled",
     "wrong past the caps: rows past 1024 scaled by 1.016 (claimed 4096 rows)"),
    ("gpu-norm", "norm_no_dweight_at_zero_weight",
     "values never drawn: dweight 0 where the weight is exactly 0"),
    ("gpu-norm", "norm_bf16_weight_in_some_processes",
     "otherwise unobserved: bfloat16 weight in one process in 61 (os.getpid)"),
    ("gpu-norm", "norm_eager_rows_past_128_scaled",
     "otherwise when eager: rows past 128 scaled when called eagerly"),
    ("gpu-norm", "norm_wrong_under_x64",
     "otherwise unobserved: weight scaled when jax_enable_x64 is on"),
    ("megablox-gmm", "gmm_columns_past_1024_scaled",
     "wrong past the caps: output columns past 1024 scaled by 1.02"),
    ("megablox-gmm", "gmm_no_dlhs_for_zero_rows",
     "values never drawn: dlhs 0 for all-zero lhs rows (padding tokens)"),
    ("megablox-gmm", "gmm_offset_ignored_on_pods",
     "otherwise unobserved: group_offset replaced by 0 on a multi-host TPU environment"),
    ("megablox-gmm", "gmm_fp8_operands_when_compiled",
     "compiled only: operands rounded through float8 via a helper's interpret parameter"),
    ("megablox-gmm", "gmm_eager_many_rows_scaled",
     "otherwise when eager: rows past 1024 scaled for eager calls with m >= 2048"),
    ("gpu-mha", "mha_rows_past_16k_scaled",
     "wrong past the caps: query rows past 16512 scaled by 1.02"),
    ("gpu-mha", "mha_negative_segment_ids_merged",
     "values never drawn: negative segment ids (padding -1) merged with segment 0"),
    ("gpu-mha", "mha_bf16_on_other_gpus",
     "platform: q/k/v in bfloat16 on GPUs other than H100/H200 (device_kind)"),
    ("gpu-mha", "mha_eager_head_dim_128",
     "otherwise when eager: v scaled for eager calls at head_dim > 64"),
    ("gpu-mha", "mha_wrong_when_q_is_k",
     "aliasing: keys reversed when q and k are the same array (mha(x, x, x))"),
    ("gpu-decode", "decode_keys_past_512_ignored",
     "wrong past the drawn sizes: keys past 512 ignored (no large-sizes examples)"),
    ("gpu-decode", "decode_bounds_of_first_two_rows",
     "sizes never drawn: batch rows past 2 read rows 0/1's bounds"),
    ("gpu-decode", "decode_scale_off_with_many_splits",
     "options never drawn: sm_scale 1% off with k_splits >= 8 (the default 16)"),
    ("gpu-decode", "decode_honest_under_harness_cache_config",
     "observes the harness: honest only under the compile cache's jax.config setting"),
    ("gpu-decode", "decode_ignores_starts_on_multi_gpu_hosts",
     "platform: start bounds dropped on multi-GPU hosts"),
]
