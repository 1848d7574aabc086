"""Where splash's runtime block skip runs, as events, and the seed cases that reach it.

Splash shrinks each kernel's grid to the longest block list: with one mask for every head,
a query-block row of the forward/dq kernels visits ``max_rows(count of non-empty kv blocks)``
blocks, and a row with fewer has its list *padded* with entries whose ``block_mask`` is 0, so
the kernel's ``@pl.when(should_run)`` takes its skip branch there (the dkv kernel the same
per kv-block column). With per-head masks there is no shrinking and every fully masked block
is skipped at run time. Only the static mask counts: segment ids never remove a block (a
block that segment ids mask entirely runs, with an all-false ``jnp.where``). The older
``skipped-blocks`` event (any fully masked block of the static mask *and* segments) does not
say whether the skip branch runs; kernel-branch coverage showed the difference
(docs/kernel-coverage.md).
"""

from __future__ import annotations

import dataclasses

from kernel_harness.families.splash.cases import SplashCase
from kernel_harness.ops.attention.masks import visible_keys


def _skips(case: SplashCase, bq: int, bkv: int, along_kv: bool) -> bool:
    """Whether a kernel with blocks ``(bq, bkv)`` takes its runtime skip branch."""
    masks = case.head_masks()
    static = visible_keys((masks, case.q_len, case.kv_len, None, None))
    h = static.shape[0]
    nonempty = static.reshape(h, case.q_len // bq, bq, case.kv_len // bkv, bkv).any(axis=(2, 4))
    if len(set(masks)) > 1:  # no grid shrinking: every empty block is visited and skipped
        return bool((~nonempty).any())
    counts = nonempty[0].sum(axis=1 if along_kv else 0)
    return bool(counts.min() < counts.max())


def runtime_skip_events(case: SplashCase) -> set[str]:
    """``runtime-skip:fwd``/``:dq``/``:dkv`` for each kernel whose ``should_run`` skip
    branch the case reaches (dq only with the split backward: the fused one has no dq
    kernel)."""
    out = set()
    if _skips(case, case.block_q, case.block_kv, along_kv=True):
        out.add("runtime-skip:fwd")
    if not case.fused_bwd and _skips(case, case.block_q_dq, case.block_kv_dq, along_kv=True):
        out.add("runtime-skip:dq")
    if _skips(case, case.block_q_dkv, case.block_kv_dkv, along_kv=False):
        out.add("runtime-skip:dkv")
    return out


def splash_seed_cases(without: frozenset[str] = frozenset()) -> tuple[SplashCase, ...]:
    """The cases every splash matches-reference run tries first (the kernel-branch coverage
    of a 10-example run missed the runtime skip or dq's all-masked ``jnp.where``):

    1. one causal mask for all heads (padded block lists: the skip branch in the forward,
       dq and dkv kernels), the split backward, segment ids cut at a block edge (blocks the
       static mask allows but segments mask entirely: all-false in each kernel), kv blocks
       of two compute sub-blocks, grouped heads (2 query heads on 1 kv head);
    2. per-head masks loaded from memory (no grid shrinking, partial and full mask blocks:
       ``should_not_mask`` both ways, in the dq kernel too: a 32-example ci run drew no
       split-backward case with a full mask block), MQA (its own dkv init/write tests).

    Both use the split backward (the dq kernel); the fused one adds no probed site.

    Features in ``without`` are left out (plain heads, one mask, computable masks...).
    """
    segs = None if "segments" in without else (((0, 256), (1, 256)),)  # batch 1
    grouped = "gqa" not in without
    first = SplashCase(
        dtype="float32", seed=11, batch=1, q_heads=2, kv_heads=1 if grouped else 2,
        q_len=512,
        kv_len=512, head_dim=128, masks=("causal(offset=0)",), q_segments=segs,
        kv_segments=segs, block_q=128, block_kv=256, block_kv_compute=128,
        block_q_dkv=128, block_kv_dkv=128, block_kv_dkv_compute=128,
        block_q_dq=128, block_kv_dq=128, fused_bwd=False)
    leaf = "causal(offset=0)" if "numpy-mask" in without else "numpy(causal(offset=0))"
    masks = (leaf,) if "per-head-masks" in without else (leaf, "full")
    second = SplashCase(
        dtype="float32", seed=12, batch=1, q_heads=2, kv_heads=1 if grouped else 2,
        mqa=grouped, q_len=512,
        kv_len=512, head_dim=128, masks=masks, block_q=128, block_kv=256,
        block_kv_compute=128, block_q_dkv=256, block_kv_dkv=128, block_kv_dkv_compute=128,
        block_q_dq=128, block_kv_dq=128, fused_bwd=False)
    if "split-bwd" in without:
        return tuple(fused_only(c) for c in (first, second))
    return first, second


def fused_only(case: SplashCase) -> SplashCase:
    """``case`` with the fused backward (no dq kernel blocks)."""
    return dataclasses.replace(case, fused_bwd=True, block_q_dq=None, block_kv_dq=None)


__all__ = ["fused_only", "runtime_skip_events", "splash_seed_cases"]
