"""Planted bugs for the flash family: the family's mutant catalog
(``kernel_harness/families/flash/mutants.py``, loaded in-process as patched copies of the
installed kernel's source) and small wrappers around the real kernel. Each one must make
the family check fail. Nothing of the kernel is stored in this repository.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu import flash_attention as _fa

from kernel_harness.records.mutant import Mutant, load_patched
from kernel_harness.regression.mutate import load_catalog

#: The catalog ``kernel-harness mutate flash`` runs, by name: the source mutants.
SOURCE_MUTANTS: dict[str, Mutant] = {m.name: m for m in load_catalog("flash")}


def source_mutant(name: str) -> Callable[..., Any]:
    """``flash_attention`` of a copy of the kernel module with catalog mutant ``name``
    applied (the one patcher, :func:`~kernel_harness.records.mutant.load_patched`)."""
    return load_patched(SOURCE_MUTANTS[name]).flash_attention


def _with_custom_backward(backward: Callable[..., Any]) -> Callable[..., Any]:
    """A flash_attention whose forward is the real kernel and whose vjp is
    ``backward(q, k, v, ab, segment_ids, do, **static) -> (dq, dk, dv, dab)``."""

    def impl(q, k, v, ab=None, segment_ids=None, *, causal, sm_scale, block_sizes):
        static = dict(causal=causal, sm_scale=sm_scale, block_sizes=block_sizes)

        @jax.custom_vjp
        def attend(q, k, v, ab, seg):
            return _fa.flash_attention(q, k, v, ab, seg, **static)

        def fwd(q, k, v, ab, seg):
            return attend(q, k, v, ab, seg), (q, k, v, ab, seg)

        def bwd(res, do):
            q, k, v, ab, seg = res
            return (*backward(q, k, v, ab, seg, do, **static), None)

        attend.defvjp(fwd, bwd)
        return attend(q, k, v, ab, segment_ids)

    return impl


def _true_vjp(q, k, v, ab, seg, do, **static):
    _, vjp = jax.vjp(lambda q, k, v, ab: _fa.flash_attention(q, k, v, ab, seg, **static),
                     q, k, v, ab)
    return vjp(do)


def _dq_scaled_twice(q, k, v, ab, seg, do, **static):
    dq, dk, dv, dab = _true_vjp(q, k, v, ab, seg, do, **static)
    return dq * static["sm_scale"], dk, dv, dab


def _segments_ignored(q, k, v, ab, seg, do, **static):
    return _true_vjp(q, k, v, ab, None, do, **static)


def _bias_dropped(q, k, v, ab, seg, do, **static):
    dq, dk, dv, _ = _true_vjp(q, k, v, None, seg, do, **static)
    return dq, dk, dv, None if ab is None else jnp.zeros_like(ab)


def pv_in_bf16(q, k, v, ab=None, segment_ids=None, *, causal, sm_scale, block_sizes):
    """Forward whose PV product secretly sees bf16-rounded values."""
    v16 = v.astype(jnp.bfloat16).astype(v.dtype)
    return _fa.flash_attention(q, k, v16, ab, segment_ids, causal=causal, sm_scale=sm_scale,
                               block_sizes=block_sizes)


WRAPPER_MUTANTS: dict[str, Callable[..., Any]] = {
    "wrapper-dq-scaled-twice": _with_custom_backward(_dq_scaled_twice),
    "wrapper-backward-ignores-segments": _with_custom_backward(_segments_ignored),
    "wrapper-backward-drops-bias": _with_custom_backward(_bias_dropped),
    "wrapper-pv-in-bf16": pv_in_bf16,
}


def mutant(name: str) -> Callable[..., Any]:
    """Any planted bug by name (source mutant or wrapper)."""
    return WRAPPER_MUTANTS[name] if name in WRAPPER_MUTANTS else source_mutant(name)


ALL_MUTANTS: tuple[str, ...] = (*SOURCE_MUTANTS, *WRAPPER_MUTANTS)


def _runs(*pairs: int) -> tuple[tuple[int, int], ...]:
    return tuple(zip(pairs[::2], pairs[1::2], strict=True))


#: Two hand-made cases with every feature on: the tiled forward (kv grid and sub-tiles,
#: batch 3 with a partial block_b=2 block) and the single-tile forward.
SHARP_CASES: dict[str, dict[str, Any]] = {
    "tiled": dict(
        dtype="float32", seed=11, batch=3, q_heads=1, kv_heads=1, q_len=512, kv_len=512,
        head_dim=64, is_causal=True, scale=0.0625, bias="full",
        q_segments=(_runs(2, 100, 0, 1, 1, 300, 2, 111), _runs(0, 512), _runs(3, 7, 1, 505)),
        kv_segments=(_runs(2, 100, 0, 1, 1, 300, 2, 111), _runs(0, 512), _runs(3, 7, 1, 505)),
        block_b=2, block_q=128, block_k_major=256, block_k=128,
        block_q_major_dkv=256, block_k_major_dkv=256, block_k_dkv=128, block_q_dkv=128,
        block_k_major_dq=256, block_k_dq=128, block_q_dq=128,
    ),
    "single-tile": dict(
        dtype="float32", seed=12, batch=2, q_heads=2, kv_heads=2, q_len=256, kv_len=256,
        head_dim=64, is_causal=True, scale=0.0625, bias="full",
        q_segments=(_runs(1, 40, 0, 216), _runs(3, 1, 2, 255)),
        kv_segments=(_runs(1, 40, 0, 216), _runs(3, 1, 2, 255)),
        block_b=2, block_q=64, block_k_major=256, block_k=256,
        block_q_major_dkv=128, block_k_major_dkv=128, block_k_dkv=128, block_q_dkv=64,
        block_k_major_dq=256, block_k_dq=128, block_q_dq=64,
    ),
}
