"""Adapter for the GPU (Triton) flash attention ``mha`` with its fused backward."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.core.backends import current_backend
from kernel_harness.families import gpu_common
from kernel_harness.families.gpu_mha.cases import MhaCase, large_blocks
from kernel_harness.ops.attention.strategy import problems
from kernel_harness.records.claims import Claim, LargeSizes, Span, Tier

#: The Pallas Triton op module the family wraps (jax <= 0.12.0.1: ``gpu_common.triton_op``).
OPS = ("attention",)
_attention = gpu_common.triton_op("attention")

#: The default implementation: ``jax.experimental.pallas.ops.gpu.attention.mha``.
mha = _attention.mha
BlockSizes = _attention.BlockSizes

IMPL_SIGNATURE = (
    "mha(q, k, v, segment_ids, *, sm_scale, causal, block_sizes: attention.BlockSizes, "
    "num_warps, num_stages, interpret, return_residuals=False) -> out, or (out, lse) with "
    "return_residuals; q: [batch, q_len, heads, head_dim], k/v: [batch, kv_len, heads, "
    "head_dim], segment_ids: int32 [batch, kv_len] or None, lse: float32 [batch, heads, "
    "q_len] in log base 2; differentiable (jax.vjp) in q, k, v"
)


def block_sizes(case: MhaCase) -> Any:
    """The ``BlockSizes`` the case requests (the kernel clamps them to the lengths)."""
    return BlockSizes(**gpu_common.case_options(
        case, "block_q", "block_k", "block_q_dkv", "block_kv_dkv", "block_q_dq", "block_kv_dq"))


def _build(impl: Callable[..., Any], case: MhaCase, interpret: Any) -> Callable[..., Any]:
    kwargs = gpu_common.case_options(case, "num_warps", "num_stages",
                                     sm_scale=case.effective_scale, causal=case.is_causal,
                                     block_sizes=block_sizes(case), interpret=interpret)

    def fn(q, k, v, segment_ids, do):
        out, vjp = jax.vjp(lambda q, k, v: impl(q, k, v, segment_ids, **kwargs), q, k, v)
        dq, dk, dv = vjp(do)
        # lse is only returned by a non-differentiable call, so it is a second forward;
        # its out is the kernel's result too (a caller asks for both), judged as out.
        out_residuals, lse = impl(q, k, v, segment_ids, return_residuals=True, **kwargs)
        return {"out": out, "lse": lse, "dq": dq, "dk": dk, "dv": dv,
                "out_residuals": out_residuals}

    return gpu_common.jit(fn, cpu=interpret is True)


#: The claimed sizes (batch, tokens, heads, head_dim, dtype, causal, segment ids): long
#: causal contexts, packed documents (causal within each segment) and a long non-causal
#: one that every ``--without`` keeps. Queries and keys have one length (the fused
#: backward needs as many query blocks as key blocks). Each claimed size has a (dtype,
#: segment ids) of its own, which the ladder's rungs keep and the small size does not have:
#: causal is looked up by them (:func:`_is_causal`), so a rung is traced as its claimed size.
_CLAIMED = (
    (1, 32768, 8, 128, jnp.bfloat16, True, False),
    (2, 16384, 4, 64, jnp.float16, True, True),
    (1, 65536, 4, 64, jnp.float32, False, False),
    # A serving batch: many heads and rows of packed documents (round 6 of the adversarial
    # set passed a kernel wrong past 4 heads or past 2 rows, the drawn limits).
    (8, 4096, 32, 128, jnp.bfloat16, False, True),
)
#: The claimed size whose large examples grow heads, rows and head_dim, not the context.
_WIDE = 3
_SMALL = (1, 128, 2, 64, jnp.float32, False, True)


def _mha_arrays(batch: int, tokens: int, heads: int, head_dim: int, dtype: Any,
                causal: bool, segments: bool) -> dict[str, jax.ShapeDtypeStruct]:
    del causal  # looked up by shape: ``_is_causal``
    qkv = jax.ShapeDtypeStruct((batch, tokens, heads, head_dim), dtype)
    arrays = {"q": qkv, "k": qkv, "v": qkv, "do": qkv}
    if segments:
        arrays["segment_ids"] = jax.ShapeDtypeStruct((batch, tokens), jnp.int32)
    return arrays


def _cross(q_len: int, kv_len: int) -> dict[str, jax.ShapeDtypeStruct]:
    """float32, non-causal, without segment ids (the 64k claimed size's kind): ``q_len``
    queries over ``kv_len`` keys, 4 heads of 64."""
    q = jax.ShapeDtypeStruct((1, q_len, 4, 64), jnp.float32)
    kv = jax.ShapeDtypeStruct((1, kv_len, 4, 64), jnp.float32)
    return {"q": q, "k": kv, "v": kv, "do": q}


def _blocks(q_len: int, kv_len: int) -> Any:
    """The kernel's default ``BlockSizes``; for queries and keys of other lengths, its
    backward's blocks scaled so both lengths split into as many (its fused backward's
    requirement)."""
    blocks = BlockSizes.get_default()
    if q_len == kv_len:
        return blocks
    base = blocks.block_q  # 128: the shorter length's block stays 16 or more
    bq, bk = (base * q_len // kv_len, base) if kv_len > q_len else (base, base * kv_len // q_len)
    return dataclasses.replace(blocks, block_q_dkv=bq, block_kv_dkv=bk, block_q_dq=bq,
                               block_kv_dq=bk)


def _is_causal(arrays: Any) -> bool:
    """Whether ``arrays`` (abstract or traced) are a claimed size, or a rung of the ladder
    below one, traced causal: looked up by dtype and segment ids, not by shape (a rung's
    shape is drawn)."""
    segments = "segment_ids" in arrays
    return any(jnp.dtype(arrays["q"].dtype) == jnp.dtype(dt) and seg == segments and causal
               for _, _, _, _, dt, causal, seg in _CLAIMED)


def claimed_call(impl: Callable[..., Any], arrays: dict[str, Any]) -> Any:
    """``impl`` called as :func:`_build` calls it (forward under ``jax.vjp``, its backward,
    the residuals call), with the kernel's default ``BlockSizes``, on (abstract) arrays
    (``Claim.call``)."""
    q, k, v = arrays["q"], arrays["k"], arrays["v"]
    segment_ids = arrays.get("segment_ids")
    kwargs = dict(sm_scale=1.0 / math.sqrt(q.shape[-1]), causal=_is_causal(arrays),
                  block_sizes=_blocks(q.shape[1], k.shape[1]), num_warps=None, num_stages=2,
                  interpret=current_backend().pallas_interpret())
    out, vjp = jax.vjp(lambda q, k, v: impl(q, k, v, segment_ids, **kwargs), q, k, v)
    _, lse = impl(q, k, v, segment_ids, return_residuals=True, **kwargs)
    return out, lse, vjp(arrays["do"])


def _uses(arrays: Any) -> frozenset[str]:
    return frozenset({"causal"} if _is_causal(arrays) else ()) | frozenset(
        {"segments"} if "segment_ids" in arrays else ())


def _large_spans(tokens: int, heads: tuple[int, int], batch: tuple[int, int],
                 wide: tuple[int, int, int]) -> tuple[dict[str, Span], ...]:
    """Per claimed size: tokens from past the drawn 128 to ``tokens`` (whole 128-token
    blocks), head_dim up to the 128 the bfloat16 size claims (the strategy draws 32-64),
    heads and batch from ``heads``, ``batch`` (at most the claimed ones); the wide size's
    tokens, heads and batch up to ``wide`` and head_dim from 16 (never drawn otherwise)."""
    spans = [{"tokens": Span(256, min(tokens, size[1]), 128),
              "heads": Span(heads[0], min(heads[1], size[2])),
              "batch": Span(batch[0], min(batch[1], size[0])),
              "head_dim": Span(64, 128, 16)} for size in _CLAIMED]
    spans[_WIDE] = {"tokens": Span(128, wide[0], 128), "heads": Span(1, wide[1]),
                    "batch": Span(1, wide[2]), "head_dim": Span(16, 128, 16)}
    return tuple(spans)


_LARGE_CASES = problems(MhaCase, blocks=large_blocks)

#: Real examples up to the claimed sizes (``large-sizes``): every claimed size's dtype,
#: causal flag and segment ids, its context capped (interpret time grows with its square:
#: 4352 tokens at head_dim 128 took 4.5-7.7 s a case, forward and backward).
LARGE = LargeSizes(
    names=tuple(f"{size[1] // 1024}k tokens, {jnp.dtype(size[4]).name}"
                + (", causal" if size[5] else "") + (", segments" if size[6] else "")
                for size in _CLAIMED),
    cases=lambda i, spans, without: _LARGE_CASES(
        without=without, dtypes=(jnp.dtype(_CLAIMED[i][4]).name,), sizes=spans,
        options={"causal": _CLAIMED[i][5], "segments": _CLAIMED[i][6], "differ": False}),
    uses=lambda i: _uses(_mha_arrays(*_CLAIMED[i])) | {jnp.dtype(_CLAIMED[i][4]).name},
    tiers={
        "ci": Tier(why="contexts capped at 4352 tokens (the first 128-token block past 4k) "
                   "of 16k-64k, one head, batch 1, head_dim up to 128 in every dtype "
                   "(interpret time grows with the context's square); the serving batch "
                   "at 128 tokens, 16 of its 32 heads, 4 of its 8 rows, head_dim 16-128",
                   spans=_large_spans(4352, (1, 1), (1, 1), (128, 16, 4))),
        "nightly": Tier(why="contexts capped at 16384 tokens (of 16k-64k: ~14x the ci "
                        "cost a case), up to 2 heads, batch 1, head_dim up to 128; the "
                        "serving batch at up to 512 tokens, all 32 heads, all 8 rows",
                        spans=_large_spans(16384, (1, 2), (1, 1), (512, 32, 8))),
    })


def segment_ids_at(shape: tuple[int, ...], rng: Any) -> Any:
    """Packed documents of any length: sorted, non-negative, far apart (ids past what a
    float holds), a new document every 64 tokens on average."""
    starts = rng.random(shape) < 1 / 64
    return np.cumsum(starts * rng.integers(1, 2 ** 20, shape), axis=-1)


#: The longest sequences the kernel is meant for: a model's context, tens of thousands of
#: tokens (causal, or packed documents), traced at those sizes by ``claimed-sizes``.
CLAIM = Claim(
    reason="attention over a model's context: 16k-64k tokens, causal (32k bfloat16), "
    "packed documents with segment ids (16k float16, causal) and non-causal (64k float32); "
    "a serving batch of 8 rows of packed documents, 32 heads of 128 (4k bfloat16)",
    sizes=lambda: tuple(_mha_arrays(*size) for size in _CLAIMED),
    small=lambda: _mha_arrays(*_SMALL),
    call=claimed_call,
    uses=_uses,
    large=LARGE,
    integers=lambda name, a, arrays, rng: segment_ids_at(a.shape, rng),
    # Queries and keys of other lengths past the drawn ones (a prefill chunk over a long
    # cache, and the reverse), where only the real runs looked: every claimed size has one
    # length (round 11 inverted the causal flag only there, past 4352 keys).
    stand_in_sizes=lambda: (_cross(1024, 8192), _cross(8192, 1024)))


#: How the gpu-mha family calls its kernel: forward and backward (cotangent ``do``).
ADAPTER = gpu_common.triton_adapter(
    kernel=mha, impl_signature=IMPL_SIGNATURE, build=_build,
    names=("q", "k", "v", "segment_ids", "do"), optional=("segment_ids",), ops=OPS)
