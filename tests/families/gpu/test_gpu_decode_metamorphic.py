"""gpu-decode's metamorphic hooks: keys outside [start, end) are invisible (a kernel that
ignores start_idx fails), and the ci draw reaches every mode the strategy declares."""

from __future__ import annotations

from kernel_harness.families.gpu_decode import kernel
from kernel_harness.families.gpu_decode.cases import DecodeCase, decode_cases
from kernel_harness.families.gpu_decode.family import FAMILY
from tests.families.paged_decode.helpers import fails, passes
from tests.helpers.mode_reach import assert_reaches, reach

#: Keys 24..63 visible of 64: the first 24 may change freely.
CASE = DecodeCase(dtype="float32", seed=4, batch=1, q_heads=4, kv_heads=2, kv_len=64,
                  head_dim=16, start=24, block_k=16)


def ignores_start(q, k, v, start_idx, kv_seq_len, **kw):
    """Every key from 0 counts: start_idx is dropped."""
    return kernel.decode(q, k, v, None, kv_seq_len, **kw)


def test_invisible_keys_are_ignored():
    passes("gpu-decode", "invisible-inputs-ignored", [CASE], max_examples=4)
    fails("gpu-decode", "invisible-inputs-ignored", [CASE], ignores_start, max_examples=6)


def test_ci_draw_reaches_every_mode():
    modes = {"entry-gqa", "entry-mqa", "mqa", "gqa", "mha-heads", "head-splits",
             "head-padding", "multi-split", "multi-k-block", "block-k-clamped",
             "start-scalar", "start-per-row", "end-scalar", "end-per-row", "unnormalized",
             "rows-without-keys", "split-skipped", "scale-arg", "scale-prescaled-q"}
    assert_reaches(reach(decode_cases(), FAMILY.events), modes, "gpu-decode")
