"""flywheel-tpu's ragged cache append (issue 57; the writer its flash_attn_with_kvcache
runs): a small case passes bit for bit and appending the inactive sequences is seen.
(The op: tests/ops/test_kv_cache_write.py; where flywheel-tpu cannot be and the export:
tests/families/test_flywheel_tpu_library.py; every mutant: nightly.)"""

from __future__ import annotations

import pytest

from kernel_harness.core.backends import resolve_backend
from kernel_harness.families.flywheel_tpu_ragged_append.cases import FlywheelAppendCase
from kernel_harness.records.mutant import load_patched
from kernel_harness.records.registry import get_family
from kernel_harness.run.runner import check_case
from tests.helpers.libraries import flywheel_installed_or_skip

NAME = "flywheel-tpu-ragged-append"

#: A page crossed, a sequence writing nothing, two inactive sequences with junk.
SMALL = FlywheelAppendCase(dtype="bfloat16", seed=4, cache_lens=(120, 3), new_lens=(12, 0),
                           page_size=128, pages_per_seq=2, kv_heads=1, head_dim=128,
                           spare_pages=1, pad_rows=3, inactive_seqs=2)


def test_the_inactive_sequences_hold_junk_that_points_into_the_cache():
    inputs = SMALL.materialize()
    n = SMALL.num_seqs
    assert inputs["num_active"].tolist() == [n]
    assert len(inputs["all_cache_lens"]) == n + 2 and len(inputs["all_cu_new_lens"]) == n + 3
    assert inputs["all_cu_new_lens"][-1] > inputs["all_cu_new_lens"][n]  # junk rows to copy
    assert inputs["flat_block_table"].max() < SMALL.total_pages
    with pytest.raises(ValueError, match="inactive_seqs must be >= 0"):
        FlywheelAppendCase(**{**SMALL.__dict__, "inactive_seqs": -1})


def test_a_small_append_passes_and_appending_inactive_sequences_is_seen():
    flywheel_installed_or_skip()
    from kernel_harness.families.flywheel_tpu_ragged_append.mutants import MUTANTS

    family, backend = get_family(NAME), resolve_backend("interpret")
    result = check_case(family, SMALL, backend)
    assert result.passed, [v.problems for v in result.verdicts]
    module = load_patched(next(m for m in MUTANTS if m.name == "inactive-appended"))

    def impl(*args, **kwargs):
        return module.append_ragged(*args, **kwargs)

    assert not check_case(family, SMALL, backend, impl).passed
