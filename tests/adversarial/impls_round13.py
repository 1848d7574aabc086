"""Round 13 of the independent adversarial set: 25 implementations, 5 per family, for
gpu-softmax, gpu-norm, megablox-gmm, gpu-mha and gpu-decode.

Rules as followed: every implementation is wrong (or a cheat) for an input its family
claims (``kernel-harness describe``: claimed sizes, dtypes, value ranges, the contract),
and is meant to pass ``check FAMILY --profile ci --max-examples 8``. Written from
README.md, docs/ (not docs/adversarial.md), the package source under kernel_harness/
(families' adapters, claims, ops/values.py, checks/aimed.py, run/source_rules.py headers)
and ``describe`` output; nothing under tests/ or golden/, no git history, and no harness
run on these implementations (confirmation with standalone scripts under /tmp/round13
and by reasoning about shapes).

Themes (each kernel is the family's pristine Pallas kernel, called as the adapter calls
it, so every kernel body, its integer bounds and its floating literals are the
family's own):

- **Bit keys** (``_key``): a slice is wrong only when its first (or last) three elements
  carry three fixed bit patterns, compared as unsigned INTEGERS after a bitcast. The
  aimed-constant check harvests floating literals only; the patterns are claimed values
  (ordinary finite floats) that a random or menu draw hits with probability ~2^-40 or
  less; the wrongness itself is layout (a flip, a roll) chosen by ``where``.
- **Claimed sizes past every run**: a shape branch that only fires at a claimed size
  beyond the ci large-size caps and away from every stand-in size, where the result is a
  layout copy (one half of the rows duplicated by slice + dynamic_update_slice, both
  layout for claimed-sizes' primitive sets) or the inputs lose mantissa bits by an
  integer and-mask that is applied at EVERY size (identity mask except at the claimed
  size), so the traced program has the same primitives at every size, with no narrowing
  cast and no floating elementwise work for the layout-only measure.
- **Integer keys**: group sizes, segment ids or decode bounds equal to a fixed integer
  tuple (never drawn at the drawn sizes' odds).
- **Python-side eps**: norm's eps is a Python float; the branch on its decimal repr is
  never traced, so no literal is in the program for ``aimed`` to aim at, and the drawn
  eps values (10 ** (e / 100)) never have a short repr other than a power of ten.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from jax import lax

from kernel_harness.families.gpu_decode import kernel as _dec
from kernel_harness.families.gpu_mha import kernel as _mha
from kernel_harness.families.gpu_norm import kernel as _norm
from kernel_harness.families.gpu_softmax import kernel as _sm
from kernel_harness.families.megablox_gmm import kernel as _gmm

# Bit patterns (as integers) of three ordinary finite values: 32-bit and 16-bit views.
_K32 = (0x3FC90FDB, 0xC02DF854, 0x3EAAAAAB)
_K16 = (0x3FC9, 0xC02D, 0x3EAB)


def _key(x: Any, tail: bool = False) -> Any:
    """Per-slice boolean (over the last axis): its first (or last) three elements have
    the bit patterns _K32 / _K16, compared as unsigned integers."""
    if x.shape[-1] < 3:
        return jnp.zeros(x.shape[:-1], bool)
    wide = jnp.dtype(x.dtype).itemsize == 4
    bits = lax.bitcast_convert_type(x, jnp.uint32 if wide else jnp.uint16)
    pats = _K32 if wide else _K16
    part = bits[..., -3:] if tail else bits[..., :3]
    hit = part[..., 0] == jnp.asarray(pats[0], bits.dtype)
    for i in (1, 2):
        hit = hit & (part[..., i] == jnp.asarray(pats[i], bits.dtype))
    return hit


def _droll(y: Any, hit: Any, axis: int, by: int = 1) -> Any:
    """y rolled by ``by`` along ``axis`` where the scalar ``hit`` holds, else y: a roll by
    a traced integer is a concatenate and a dynamic_slice (layout), with no select_n or
    rev on the problem-size array."""
    return jnp.roll(y, hit.astype(jnp.int32) * by, axis=axis)


def _first(x: Any) -> Any:
    """The first slice along the last axis (a [n] vector)."""
    return x.reshape(-1, x.shape[-1])[0]


def _halves(y: Any, axis: int, on: bool) -> Any:
    """y with its second half along ``axis`` overwritten by a copy of its first half when
    ``on`` (decided in Python from the shape), else y written back over itself: the same
    slice + dynamic_update_slice at EVERY size (both layout for claimed-sizes and for the
    layout-only measure; its VJP's add_any appears at every size too)."""
    n = y.shape[axis]
    h = n // 2
    return lax.dynamic_update_slice_in_dim(y, lax.slice_in_dim(y, 0, n - h, axis=axis),
                                           h if on else 0, axis)


def _trunc(x: Any, lossy: bool) -> Any:
    """x with low mantissa bits cleared by an integer ``and`` on its bits, at EVERY size
    (so the traced program has the same primitives at every size); the mask keeps every
    bit unless ``lossy`` (decided in Python from the shape), then it keeps bfloat16's
    precision (32-bit floats) or 6 of float16's 10 mantissa bits. Integer ``and`` is not
    floating work (not measured outside the kernel), and there is no narrowing cast."""
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return x
    wide = jnp.dtype(x.dtype).itemsize == 4
    ut = jnp.uint32 if wide else jnp.uint16
    if wide:
        mask = 0xFFFF0000 if lossy else 0xFFFFFFFF
    else:
        mask = 0xFFF0 if lossy else 0xFFFF
    bits = lax.bitcast_convert_type(x, ut) & jnp.asarray(mask, ut)
    return lax.bitcast_convert_type(bits, x.dtype)


# --------------------------------------------------------------------------- gpu-softmax


def sm_bitkey_flip(x, *, axis=-1, interpret=False):
    """Class: wrong for values never drawn (bit key). Wrong: when the first row's first
    three logits are exactly the _K32/_K16 bit patterns (float32 1.5707964, -2.7181597,
    0.33333334; bfloat16 1.5703125, -2.703125, 0.333984375), every row's probabilities
    come back rolled by one lane. Gets through: the key is an unsigned-integer comparison
    on three elements (aimed harvests floating literals only; far below P/64 for the
    layout-only measure), the roll by a traced shift is concatenate + dynamic_slice
    (layout, no select_n or rev on the output), and no draw hits three exact patterns."""
    out = _sm.softmax(x, axis=axis, interpret=interpret)
    return _droll(out, _key(_first(x)), -1)


def sm_tailkey_roll(x, *, axis=-1, interpret=False):
    """Class: wrong for values never drawn (bit key at the row's end). Wrong: when the
    first row's LAST three logits carry the key patterns, every row's probabilities come
    back rolled by two lanes. Gets through as sm_bitkey_flip (masked suffixes are -inf,
    never the patterns)."""
    out = _sm.softmax(x, axis=axis, interpret=interpret)
    return _droll(out, _key(_first(x), tail=True), -1, by=2)


def sm_vocab_rows(x, *, axis=-1, interpret=False):
    """Class: wrong only at a claimed size never run. Wrong: 2-D x with >= 8 rows of
    >= 131072 logits (the claimed (8, 262144) bfloat16 vocabulary): the second half of
    the rows gets a copy of the first half's probabilities. Gets through: ci large sizes
    cap those rows at 2, stand-in sizes are (2, n); at the claimed size the wrapper adds
    only a slice and a dynamic_update_slice (layout for claimed-sizes) to one pristine
    kernel over every row."""
    out = _sm.softmax(x, axis=axis, interpret=interpret)
    return _halves(out, 0, x.ndim == 2 and x.shape[0] >= 8 and x.shape[1] >= 131072)


def sm_router_deep(x, *, axis=-1, interpret=False):
    """Class: wrong only at a claimed size never run. Wrong: 3-D x whose second leading
    axis is >= 4096 (the claimed (4, 8192, 256) bfloat16 router): the second half of that
    axis copies the first half's probabilities. Gets through: ci caps it at 2x64 and
    nightly at 4x512; the stand-in sizes are 2-D or 4-D; layout only."""
    out = _sm.softmax(x, axis=axis, interpret=interpret)
    return _halves(out, x.ndim - 2, x.ndim == 3 and x.shape[1] >= 4096)


def sm_f32_vocab_bf16(x, *, axis=-1, interpret=False):
    """Class: lower precision at a claimed size never run. Wrong: float32 2-D x with >= 64
    rows of >= 32000 logits (the claimed (64, 32000) float32 size): the logits are
    truncated to bfloat16's 8 significant bits (errors ~1e-2 of a probability for logits
    of a few units vs max_rel 5e-6). Gets through: ci caps those rows at 2, stand-in
    float32 rows are <= 256 long; the truncation is an integer and-mask on the bits at
    every size (identity mask elsewhere): same primitives at every size, no narrowing
    cast, no floating elementwise work."""
    lossy = x.ndim == 2 and x.shape[0] >= 64 and x.shape[1] >= 32000
    return _sm.softmax(_trunc(x, lossy), axis=axis, interpret=interpret)


# ------------------------------------------------------------------------------ gpu-norm


def nm_bitkey_flip(op, x, weight, bias, *, eps, interpret):
    """Class: wrong for values never drawn (bit key). Wrong: when x's first row starts
    with the key patterns, the whole output is rolled by one along n (gradients follow
    through the roll). Gets through: integer comparison on three elements, a roll by a
    traced shift (concatenate + dynamic_slice: layout), no draw hits it."""
    out = _norm.norm(op, x, weight, bias, eps=eps, interpret=interpret)
    return _droll(out, _key(_first(x)), -1)


def nm_weightkey_swap(op, x, weight, bias, *, eps, interpret):
    """Class: wrong for values never drawn (bit key on the weight). Wrong: when weight's
    first three entries carry the key patterns, weight and bias are swapped for the whole
    call. Gets through: the swap is a dynamic index into stack([weight, bias]) (layout,
    [n]-sized, far below P/64); one pristine kernel call."""
    pair = jnp.stack([weight, bias])
    i = _key(weight).astype(jnp.int32)
    w = lax.dynamic_index_in_dim(pair, i, keepdims=False)
    b = lax.dynamic_index_in_dim(pair, 1 - i, keepdims=False)
    return _norm.norm(op, x, w, b, eps=eps, interpret=interpret)


def nm_tall_rows(op, x, weight, bias, *, eps, interpret):
    """Class: wrong only at a claimed size never run. Wrong: x with >= 1024 rows (both
    claimed sizes, (1, 4096, 8192) and (2, 1024, 16384)): the second half of the rows
    copies the first half's output (dx follows). Gets through: ci caps rows at 300,
    nightly at 1000; slice + dynamic_update_slice is layout; the kernel is pristine."""
    out = _norm.norm(op, x, weight, bias, eps=eps, interpret=interpret)
    return _halves(out, 1, x.shape[1] >= 1024)


def nm_wide_bf16(op, x, weight, bias, *, eps, interpret):
    """Class: lower precision at a claimed size never run. Wrong: float32 x with >= 1024
    rows of >= 16384 (the claimed (2, 1024, 16384) float32): x truncated to bfloat16's
    precision first (error ~4e-3 vs max_rel 1e-4). Gets through: ci rows <= 300; the
    truncation is an integer and-mask at every size (see _trunc)."""
    lossy = x.dtype == jnp.float32 and x.shape[1] >= 1024 and x.shape[2] >= 16384
    return _norm.norm(op, _trunc(x, lossy), weight, bias, eps=eps, interpret=interpret)


def nm_eps_repr(op, x, weight, bias, *, eps, interpret):
    """Class: wrong for values never drawn (a Python-side test of eps). Wrong: an eps
    whose repr is one significant digit 2, 3, 5 or 7 in exponent form (2e-06, 5e-06,
    3e-05, 7e-08: claimed, eps is any positive float) is replaced by eps + 1 (out shrinks
    by ~sqrt(var / (var + 1))). The menus (1e-5, 1e-6, 1e-3, 0.1, 100, 1e-12), the
    scale-equivariance relation's eps * 4^k (leading digits 1, 4, 1.6, 6.4, 2.56, 2.5,
    6.25...) and the aimed cases' c * 1.01 never give such a repr. Gets through:
    the test runs in Python on the float, so no literal of it is traced for aimed; drawn
    eps are 10 ** (e / 100), whose reprs are long except the powers of ten."""
    text = repr(float(eps))
    if len(text) in (5, 6) and text[0] in "2357" and text[1:3] == "e-":
        eps = eps + 1
    return _norm.norm(op, x, weight, bias, eps=eps, interpret=interpret)


# -------------------------------------------------------------------------- megablox-gmm


def gm_bitkey_flip(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                   tiling=(128, 128, 128), group_offset=None, existing_out=None,
                   transpose_rhs=False, interpret=False):
    """Class: wrong for values never drawn (bit key). Wrong: when lhs's first row starts
    with the key patterns, the whole output comes back rolled by one row. Gets through:
    integer comparison on a scalar key, a roll by a traced shift (layout)."""
    out = _gmm.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                   existing_out, transpose_rhs, interpret)
    return _droll(out, _key(lhs[0]), 0)


def gm_groupkey_flip(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                     tiling=(128, 128, 128), group_offset=None, existing_out=None,
                     transpose_rhs=False, interpret=False):
    """Class: wrong for integer inputs never drawn. Wrong: >= 5 groups whose first five
    sizes are exactly (1, 2, 3, 5, 8) (a valid ragged split): the output columns come
    back rolled by one. Gets through: drawn group sizes (random splits of m >= 128) hit
    that exact prefix with negligible odds; integer test, layout roll."""
    out = _gmm.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                   existing_out, transpose_rhs, interpret)
    if group_sizes.shape[0] < 5:
        return out
    want = jnp.asarray((1, 2, 3, 5, 8), group_sizes.dtype)
    hit = jnp.all(group_sizes[:5] == want)
    return _droll(out, hit, 1)


def gm_tall_rows(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                 tiling=(128, 128, 128), group_offset=None, existing_out=None,
                 transpose_rhs=False, interpret=False):
    """Class: wrong only at a claimed size never run. Wrong: m >= 32768 (two claimed
    sizes): the output's second half of rows copies its first half. Gets through: ci
    caps m at 16384 (nightly reaches 32768, but ci is the profile measured), the
    stand-ins stop at 8192; the kernel computes every row and the wrapper only slices."""
    out = _gmm.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                   existing_out, transpose_rhs, interpret)
    return _halves(out, 0, lhs.shape[0] >= 32768)


def gm_f32_bf16(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                tiling=(128, 128, 128), group_offset=None, existing_out=None,
                transpose_rhs=False, interpret=False):
    """Class: lower precision at a claimed size never run. Wrong: float32 with m >= 16384
    and k >= 6144 (the claimed (16384, 6144, 4096, 8) float32): lhs truncated to
    bfloat16's precision first (relative error ~3e-3). Gets through: ci's long-k span has
    m 128, the float32 stand-in at k 6144 has m 256; the truncation is an integer and-mask
    at every size (see _trunc)."""
    lossy = lhs.shape[0] >= 16384 and lhs.shape[1] >= 6144
    lhs = _trunc(lhs, lossy and lhs.dtype == jnp.float32)
    return _gmm.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                    existing_out, transpose_rhs, interpret)


def gm_wide_cols(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                 tiling=(128, 128, 128), group_offset=None, existing_out=None,
                 transpose_rhs=False, interpret=False):
    """Class: wrong only at a claimed size never run. Wrong: m >= 32768 and n >= 8192 (the
    claimed (32768, 4096, 14336, 64) bfloat16): the second half of the output columns
    copies the first half. Gets through: no run or stand-in has both (the n = 14336
    stand-in has m 256); layout only."""
    out = _gmm.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                   existing_out, transpose_rhs, interpret)
    return _halves(out, 1, lhs.shape[0] >= 32768 and out.shape[1] >= 8192)


# ------------------------------------------------------------------------------- gpu-mha


def _on_out(res: Any, fn: Any) -> Any:
    if isinstance(res, tuple):
        return (fn(res[0]), *res[1:])
    return fn(res)


def mh_bitkey_flip(q, k, v, segment_ids, **kwargs):
    """Class: wrong for values never drawn (bit key). Wrong: when q[0, 0, 0] starts with
    the key patterns, out comes back rolled by one query (lse untouched; gradients follow
    the roll). Gets through: integer comparison on three elements, layout roll."""
    res = _mha.mha(q, k, v, segment_ids, **kwargs)
    hit = _key(q[0, 0, 0])
    return _on_out(res, lambda o: _droll(o, hit, 1))


def mh_long_context(q, k, v, segment_ids, **kwargs):
    """Class: wrong only at a claimed size never run. Wrong: q_len >= 16385 (claimed
    32768- and 65536-token contexts): the second half of the query rows copies the first
    half's output. Gets through: ci caps contexts at 4352, nightly at 16384; layout
    only, pristine kernels."""
    res = _mha.mha(q, k, v, segment_ids, **kwargs)
    return _on_out(res, lambda o: _halves(o, 1, q.shape[1] > 16384))


def mh_serving_heads(q, k, v, segment_ids, **kwargs):
    """Class: wrong only at a claimed size never run. Wrong: >= 32 heads, >= 4096 tokens
    and batch >= 8 (the claimed serving batch (8, 4096, 32, 128)): heads 16-31 copy heads
    0-15.
    Gets through: ci runs that size at 128 tokens and 16 heads, nightly at 512 tokens;
    layout only."""
    res = _mha.mha(q, k, v, segment_ids, **kwargs)
    on = q.shape[2] >= 32 and q.shape[1] >= 4096 and q.shape[0] >= 8
    return _on_out(res, lambda o: _halves(o, 2, on))


def mh_segkey(q, k, v, segment_ids, **kwargs):
    """Class: wrong for integer inputs never drawn. Wrong: a batch row whose segment ids
    start (7, 3, 9, 1, 4) (valid: unsorted ids are in the contract) gets all its ids
    zeroed, i.e. is computed with no segment masking. Gets through: integer arithmetic
    on the int32 ids (not a floating array, not measured); drawn segment ids are runs of
    ids, five distinct ids in the first five tokens in that exact order essentially
    never happen; one pristine kernel call."""
    if segment_ids is not None and segment_ids.shape[1] >= 5:
        want = jnp.asarray((7, 3, 9, 1, 4), segment_ids.dtype)
        hit = jnp.all(segment_ids[:, :5] == want, axis=1)
        segment_ids = segment_ids * (1 - hit.astype(segment_ids.dtype))[:, None]
    return _mha.mha(q, k, v, segment_ids, **kwargs)


def mh_f32_bf16(q, k, v, segment_ids, **kwargs):
    """Class: lower precision at a claimed size never run. Wrong: float32 with q_len >=
    32768 (the claimed (1, 65536, 4, 64) float32): v truncated to bfloat16's precision
    first (out error ~3e-3 vs max_rel 2e-4). Gets through: ci caps contexts at 4352; the
    truncation is an integer and-mask at every size (see _trunc)."""
    lossy = q.dtype == jnp.float32 and q.shape[1] >= 32768
    v = _trunc(v, lossy)
    return _mha.mha(q, k, v, segment_ids, **kwargs)


# ---------------------------------------------------------------------------- gpu-decode


def dc_bitkey_flip(q, k, v, start_idx, kv_seq_len, *, entry="gqa", **kwargs):
    """Class: wrong for values never drawn (bit key). Wrong: each (batch, head) whose
    query's first three features carry the key patterns gets its output reversed along
    head_dim (l, m untouched). Gets through: integer comparison, layout choice."""
    out, res = _dec.decode(q, k, v, start_idx, kv_seq_len, entry=entry, **kwargs)
    hit = _key(q)  # [batch, heads]
    return jnp.where(hit[..., None], jnp.flip(out, axis=-1), out), res


def dc_kkey_roll(q, k, v, start_idx, kv_seq_len, *, entry="gqa", **kwargs):
    """Class: wrong for values never drawn (bit key on the cache). Wrong: a batch row
    whose first key (kv head 0) starts with the key patterns gets its output rolled by
    one head. Gets through: integer comparison, layout choice."""
    out, res = _dec.decode(q, k, v, start_idx, kv_seq_len, entry=entry, **kwargs)
    hit = _key(k[:, 0, 0])  # [batch]
    return jnp.where(hit[:, None, None], jnp.roll(out, 1, axis=1), out), res


def dc_long_cache(q, k, v, start_idx, kv_seq_len, *, entry="gqa", **kwargs):
    """Class: wrong only at a claimed size never run. Wrong: kv_len >= 65536 (the claimed
    131072-token cache): batch rows of the second half copy the first half's out, l and
    m. Gets through: the claimed sizes are traced only (no ladder, no large run), the
    stand-ins have 4096 and 2048 keys; layout only."""
    out, (den, m) = _dec.decode(q, k, v, start_idx, kv_seq_len, entry=entry, **kwargs)
    on = k.shape[1] >= 65536
    return _halves(out, 0, on), (_halves(den, 0, on), _halves(m, 0, on))


def dc_f16_batch(q, k, v, start_idx, kv_seq_len, *, entry="gqa", **kwargs):
    """Class: lower precision at a claimed size never run. Wrong: float16 with kv_len >=
    16384 (the claimed (32, 32768, 1, 64) float16): q, k, v truncated to 6 mantissa bits
    (out error ~1e-2 vs max_rel 3.5e-3, lse ~1e-2 vs 2e-5). Gets through: traced only;
    stand-ins have <= 4096 keys; the truncation is an integer and-mask at every size."""
    lossy = q.dtype == jnp.float16 and k.shape[1] >= 16384
    q, k, v = (_trunc(t, lossy) for t in (q, k, v))
    return _dec.decode(q, k, v, start_idx, kv_seq_len, entry=entry, **kwargs)


def dc_boundkey(q, k, v, start_idx, kv_seq_len, *, entry="gqa", **kwargs):
    """Class: wrong for integer inputs never drawn. Wrong: a batch row with start_idx 37
    and kv_seq_len 1061 (valid bounds, 1024 visible keys) is answered as if start_idx
    were 38. Gets through: drawn bounds hitting both exact integers at once are
    negligible; two pristine kernel calls chosen by where."""
    out, (den, m) = _dec.decode(q, k, v, start_idx, kv_seq_len, entry=entry, **kwargs)
    if start_idx is None or kv_seq_len is None:
        return out, (den, m)
    b = q.shape[0]
    s = jnp.broadcast_to(jnp.asarray(start_idx, jnp.int32), (b,))
    e = jnp.broadcast_to(jnp.asarray(kv_seq_len, jnp.int32), (b,))
    hit = (s == 37) & (e == 1061)
    out2, (den2, m2) = _dec.decode(q, k, v, s + 1, e, entry=entry, **kwargs)
    return (jnp.where(hit[:, None, None], out2, out),
            (jnp.where(hit[:, None], den2, den), jnp.where(hit[:, None], m2, m)))


ROUND13 = [
    ("gpu-softmax", "sm_bitkey_flip"),
    ("gpu-softmax", "sm_tailkey_roll"),
    ("gpu-softmax", "sm_vocab_rows"),
    ("gpu-softmax", "sm_router_deep"),
    ("gpu-softmax", "sm_f32_vocab_bf16"),
    ("gpu-norm", "nm_bitkey_flip"),
    ("gpu-norm", "nm_weightkey_swap"),
    ("gpu-norm", "nm_tall_rows"),
    ("gpu-norm", "nm_wide_bf16"),
    ("gpu-norm", "nm_eps_repr"),
    ("megablox-gmm", "gm_bitkey_flip"),
    ("megablox-gmm", "gm_groupkey_flip"),
    ("megablox-gmm", "gm_tall_rows"),
    ("megablox-gmm", "gm_f32_bf16"),
    ("megablox-gmm", "gm_wide_cols"),
    ("gpu-mha", "mh_bitkey_flip"),
    ("gpu-mha", "mh_long_context"),
    ("gpu-mha", "mh_serving_heads"),
    ("gpu-mha", "mh_segkey"),
    ("gpu-mha", "mh_f32_bf16"),
    ("gpu-decode", "dc_bitkey_flip"),
    ("gpu-decode", "dc_kkey_roll"),
    ("gpu-decode", "dc_long_cache"),
    ("gpu-decode", "dc_f16_batch"),
    ("gpu-decode", "dc_boundkey"),
]
