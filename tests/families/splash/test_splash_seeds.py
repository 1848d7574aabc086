"""splash's runtime-skip events and seed cases: the events say what the kernel executes
(checked against kernel-branch coverage), and the seeds reach the skip in every kernel."""

from __future__ import annotations

import itertools

import pytest

from kernel_harness.core.backends import resolve_backend
from kernel_harness.families.splash.cases import SplashCase
from kernel_harness.records.narrow import narrow
from kernel_harness.records.registry import get_family
from kernel_harness.run.kernel_coverage import recording

SKIP_SITE = "@pl.when(should_run)"
KERNEL_OF = {"flash_attention_kernel": "fwd", "_flash_attention_dq_kernel": "dq",
             "_flash_attention_dkv_kernel": "dkv"}


def _skips_run(case: SplashCase) -> set[str]:
    """The kernels whose should_run skip branch ran, from the kernel's own probes."""
    family = get_family("splash")
    with recording() as cov:
        family.run(family.kernel, case, case.materialize(), resolve_backend("interpret"))
    sites = [s for s in cov.sites.values() if s.source == SKIP_SITE]
    assert {KERNEL_OF[s.kernel] for s in sites} == {"fwd", "dq", "dkv"}
    return {KERNEL_OF[s.kernel] for s in sites if s.counts["false"] > 0}


@pytest.mark.parametrize("mask, skips", [
    # One block per query-block row and per kv-block column: the grid shrinks to width 1,
    # no list is padded, nothing is skipped (the old skipped-blocks event says otherwise).
    pytest.param("local(left=0, right=0, offset=0)", set(), marks=pytest.mark.nightly),
    # Rows of 1 and 2 blocks, columns of 2 and 1: padded lists in all three kernels.
    ("causal(offset=0)", {"fwd", "dq", "dkv"}),
])
def test_runtime_skip_events_match_what_the_kernel_runs(mask, skips):
    case = SplashCase(dtype="float32", seed=0, batch=1, q_heads=1, kv_heads=1, q_len=256,
                      kv_len=256, head_dim=128, masks=(mask,))
    events = set(get_family("splash").events(case))
    assert {e.removeprefix("runtime-skip:") for e in events if e.startswith("runtime-skip:")} \
        == skips
    assert "skipped-blocks" in events
    assert _skips_run(case) == skips


def test_seed_cases_reach_the_runtime_skip_of_every_kernel():
    family = get_family("splash")
    events = set().union(*(family.events(c) for c in family.seed_cases(family.without)))
    assert {"runtime-skip:fwd", "runtime-skip:dq", "runtime-skip:dkv", "segments",
            "per-head-masks", "mask-blocks", "mask-function", "mqa", "mqa-kernel"} <= events


def test_narrowed_seed_cases_do_not_use_the_features_left_out():
    family = get_family("splash")
    marks = {"segments": "segments", "per-head-masks": "per-head-masks",
             "numpy-mask": "numpy-mask", "gqa": ("gqa", "mqa")}
    for k in range(len(marks) + 1):
        for left_out in itertools.combinations(sorted(marks), k):
            narrowed = narrow(family, left_out)
            for case in narrowed.seed_cases(narrowed.without):
                events = set(family.events(case))
                for name in left_out:
                    banned = marks[name]
                    assert not events & ({banned} if isinstance(banned, str) else set(banned))
