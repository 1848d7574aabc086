"""flywheel-tpu's paged KV-cache writer (issue 57): a small case passes bit for bit and a
planted bug in the writer is seen. (The op: tests/ops/test_kv_cache_write.py; where
flywheel-tpu cannot be, bad inputs and the export: tests/families/
test_flywheel_tpu_library.py; every mutant: nightly.)"""

from __future__ import annotations

import pytest

from kernel_harness.core.backends import resolve_backend
from kernel_harness.families.flywheel_tpu_kv_cache_write.cases import (
    FlywheelKvWriteCase,
    pieces_per_block,
)
from kernel_harness.records.mutant import load_patched
from kernel_harness.records.registry import get_family
from kernel_harness.run.runner import check_case
from tests.helpers.libraries import flywheel_installed_or_skip

NAME = "flywheel-tpu-kv-cache-write"

#: One page crossed, a sequence writing nothing, junk columns, shuffled random pieces.
SMALL = FlywheelKvWriteCase(dtype="bfloat16", seed=4, cache_lens=(120, 3), new_lens=(12, 0),
                            page_size=128, pages_per_seq=2, kv_heads=1, head_dim=128,
                            spare_pages=1, pad_rows=1, split="random", shuffled=True,
                            junk_columns=3)


def test_the_restated_sizing_is_the_librarys():
    """The events' pieces per writer program (restated: events need no library) are the
    library's own."""
    flywheel_installed_or_skip()
    from kernel_harness.families.flywheel_tpu_kv_cache_write.kernel import _module

    for shape in [(128, 1, 128), (128, 3, 128), (128, 16, 128), (128, 2, 256), (256, 8, 128),
                  (128, 64, 128)]:
        assert pieces_per_block(*shape) == _module().kv_write_pieces_per_block(*shape)


@pytest.mark.nightly  # 13 s (the writer's 64-piece program); per push: its goldens (gate)
def test_a_small_write_passes_bit_for_bit():
    flywheel_installed_or_skip()
    result = check_case(get_family(NAME), SMALL, resolve_backend("interpret"))
    assert result.passed, [v.problems for v in result.verdicts]
    assert all(v.stats.max_abs_err == 0 for v in result.verdicts)


@pytest.mark.nightly  # 9 s
def test_junk_columns_read_as_pieces_are_seen():
    """The planted bug of the ci mutants: columns past num_slices treated as live."""
    flywheel_installed_or_skip()
    from kernel_harness.families.flywheel_tpu_kv_cache_write.mutants import MUTANTS

    mutant = next(m for m in MUTANTS if m.name == "junk-columns-live")
    module = load_patched(mutant)

    def impl(k, v, kv_cache, slices, num_slices, *, interpret=False):
        return module.write_kv_cache_pages(k, v, kv_cache, slices, num_slices,
                                           interpret=interpret)

    result = check_case(get_family(NAME), SMALL, resolve_backend("interpret"), impl)
    assert not result.passed
    assert {v.stats.output for v in result.verdicts if not v.passed} == {
        "kv_cache", "kv_cache_bits"}
