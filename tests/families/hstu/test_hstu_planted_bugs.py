"""Planted bugs: wrong HSTU implementations with the kernel's signature, built around the
real kernel. Each must make the hstu family check fail within a few examples, on an
output mismatch (not a crash); the unmodified kernel passes the same examples."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, settings

from kernel_harness import get_family, hstu_attention, resolve_backend
from kernel_harness.checks.properties import HarnessFailure, Observer, matches_reference
from kernel_harness.kernels.hstu import api

FAMILY = get_family("hstu")
BACKEND = resolve_backend("interpret")
MAX_EXAMPLES = 12

QUICK = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.generate,),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def divides_by_kv_len(mask_type, q, k, v, **kw):
    """Normalises by kv_len instead of q_len."""
    return hstu_attention(mask_type, q, k, v, **kw) * (q.shape[1] / k.shape[1])


def causal_excludes_diagonal(mask_type, q, k, v, **kw):
    """Causal off by one: query i sees keys j < i."""
    if isinstance(mask_type, str) and mask_type == "causal":
        mask_type = np.tril(np.ones((q.shape[1], k.shape[1]), bool), k=-1)
    return hstu_attention(mask_type, q, k, v, **kw)


def window_exclusive(mask_type, q, k, v, *, sliding_window_size=None, **kw):
    """Window off by one: |i - j| < w instead of <= w."""
    if sliding_window_size:
        sliding_window_size -= 1
    return hstu_attention(mask_type, q, k, v, sliding_window_size=sliding_window_size, **kw)


def segments_ignored_in_backward(
    mask_type, q, k, v, *, q_segment_ids=None, kv_segment_ids=None, **kw
):
    """Right forward; the backward forgets the segment ids."""
    full = functools.partial(
        hstu_attention, mask_type, q_segment_ids=q_segment_ids,
        kv_segment_ids=kv_segment_ids, **kw,
    )
    bare = functools.partial(hstu_attention, mask_type, **kw)

    @jax.custom_vjp
    def f(q, k, v):
        return full(q, k, v)

    def f_bwd(res, do):
        return jax.vjp(bare, *res)[1](do)

    f.defvjp(lambda q, k, v: (full(q, k, v), (q, k, v)), f_bwd)
    return f(q, k, v)


def _with_tables(edit, mask_type, q, k, v, *, q_segment_ids=None, kv_segment_ids=None, **kw):
    cfg, tables = api.plan(
        mask_type, q, k, v, q_segment_ids=q_segment_ids, kv_segment_ids=kv_segment_ids, **kw
    )
    tables = edit(dict(tables))
    return api.run_planned(cfg, q, k, v, q_segment_ids, kv_segment_ids, tables)


def _drop_last_flagged(flags: np.ndarray) -> np.ndarray:
    flags = flags.copy()
    for row in flags:
        on = np.flatnonzero(row)
        if on.size:
            row[on[-1]] = 0
    return flags


def forward_skips_last_block(mask_type, q, k, v, **kw):
    """Forward block-sparsity table off by one block: each q row's last kv block is skipped."""
    def edit(t):
        t["fwd_flags"] = _drop_last_flagged(t["fwd_flags"])
        return t
    return _with_tables(edit, mask_type, q, k, v, **kw)


def backward_skips_first_block(mask_type, q, k, v, **kw):
    """Backward table off by one block: each kv column's first q block is skipped."""
    def edit(t):
        t["bwd_flags"] = _drop_last_flagged(t["bwd_flags"][:, ::-1])[:, ::-1]
        return t
    return _with_tables(edit, mask_type, q, k, v, **kw)


def pv_operands_in_bf16(mask_type, q, k, v, **kw):
    """f32 inputs but the PV product sees v rounded to bf16 (bf16 accumulation class)."""
    return hstu_attention(mask_type, q, k, v.astype(jnp.bfloat16).astype(v.dtype), **kw)


def ignores_scale(mask_type, q, k, v, *, scale=None, **kw):
    """Drops the scale argument (always 1/sqrt(head_dim))."""
    del scale
    return hstu_attention(mask_type, q, k, v, **kw)


BUGS = [
    divides_by_kv_len,
    causal_excludes_diagonal,
    window_exclusive,
    segments_ignored_in_backward,
    forward_skips_last_block,
    backward_skips_first_block,
    pv_operands_in_bf16,
    ignores_scale,
]


@pytest.mark.nightly  # hstu per push: its goldens on both backends and stacks
@pytest.mark.parametrize("bug", BUGS, ids=lambda f: f.__name__)
def test_planted_bug_fails_the_family_check(bug):
    observer = Observer()
    prop = QUICK(matches_reference(FAMILY, backend=BACKEND, impl=bug, observer=observer))
    with pytest.raises(HarnessFailure) as info:
        prop()
    failed = info.value.result
    assert not failed.passed and failed.failures, "must fail on outputs, not crash"
    assert observer.examples <= MAX_EXAMPLES + len(FAMILY.seed_cases(FAMILY.without))


@pytest.mark.nightly
def test_control_real_kernel_passes_the_same_examples():
    observer = Observer()
    QUICK(matches_reference(FAMILY, backend=BACKEND, observer=observer))()
    assert observer.examples == MAX_EXAMPLES and observer.passed == MAX_EXAMPLES
