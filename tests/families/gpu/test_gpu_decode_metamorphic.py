"""gpu-decode's metamorphic hooks: keys outside [start, end) are invisible (a kernel that
ignores start_idx fails), and the ci draw reaches every mode the strategy declares."""

from __future__ import annotations

import pytest

from kernel_harness.families.gpu_decode import kernel
from kernel_harness.families.gpu_decode.cases import DecodeCase
from kernel_harness.families.gpu_decode.family import FAMILY
from tests.families.paged_decode.helpers import fails, passes
from tests.helpers.mode_reach import assert_reaches, reach

#: Keys 24..63 visible of 64: the first 24 may change freely.
CASE = DecodeCase(dtype="float32", seed=4, batch=1, q_heads=4, kv_heads=2, q_len=1, kv_len=64,
                  head_dim=16, kv_starts=24, block_k=16)


def ignores_start(q, k, v, start_idx, kv_seq_len, **kw):
    """Every key from 0 counts: start_idx is dropped."""
    return kernel.decode(q, k, v, None, kv_seq_len, **kw)


def test_invisible_keys_are_ignored():
    fails("gpu-decode", "invisible-inputs-ignored", [CASE], ignores_start, max_examples=6)


@pytest.mark.nightly  # the pristine kernel's half: docs/ci.md
def test_invisible_keys_are_ignored_on_the_pristine_kernel():
    passes("gpu-decode", "invisible-inputs-ignored", [CASE], max_examples=4)


def test_ci_draw_reaches_every_mode():
    modes = {"entry-gqa", "entry-mqa", "mqa", "gqa", "head-splits", "head-padding",
             "multi-split", "multi-k-block", "block-k-clamped", "kv-starts",
             "scalar-kv-starts", "kv-lengths", "scalar-kv-lengths", "unnormalized",
             "rows-without-keys", "split-skipped", "scale-default", "scale-arg",
             "explicit-scale", "splits>=8", "rows>2", "keys>512"}
    assert_reaches(reach(FAMILY.cases(), FAMILY.events), modes, "gpu-decode")
