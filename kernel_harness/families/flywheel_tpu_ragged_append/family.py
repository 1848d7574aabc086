"""The flywheel-tpu-ragged-append family: flywheel-tpu 0.3.0's ragged cache append
(``pallas.flash_fwd_kvcache_varlen.append_ragged``, the writer ``flash_attn_with_kvcache``
runs on a paged cache), judged against the kv-cache write op's reference with the whole
cache compared bit for bit."""

from __future__ import annotations

from typing import Any

from kernel_harness.families.flywheel_tpu import library
from kernel_harness.families.flywheel_tpu_ragged_append import kernel as _kernel
from kernel_harness.families.flywheel_tpu_ragged_append.cases import (
    FlywheelAppendCase,
    flywheel_append_cases,
)
from kernel_harness.families.flywheel_tpu_ragged_append.export import export
from kernel_harness.ops.kv_cache_write.record import kv_write_record
from kernel_harness.records.family import Family
from kernel_harness.records.kernels import KernelExpectation

CONTRACT = f"""\
flywheel-tpu {library.TESTED_VERSION} pallas.flash_fwd_kvcache_varlen.append_ragged(kv_cache,
k, v, cu_seqlens_q, cache_seqlens, block_table, num_active, page_size=, pages_per_seq=);
install: {library.INSTALL} (Python >= 3.12).
- The op (as flywheel-tpu-kv-cache-write): sequence i < num_active appends its new tokens
  (rows cu_seqlens_q[i]..cu_seqlens_q[i+1] of k and v) at positions cache_seqlens[i] ..
  through its row of the flat page table; every other element of the cache stays as it
  was, bit for bit (compared as values and as bits).
- Sequences past num_active carry junk lengths, rows and table rows pointing into pages
  the active sequences own: the append must ignore them. Sequences with no new token
  (cu_seqlens_q[i+1] == cu_seqlens_q[i]) and calls writing nothing are drawn.
- bfloat16, 128-token pages, head_dim 128 or 256, 1 to 16 kv heads (the interleave step
  of 8192 / (kv_heads x head_dim) rows divides the page).
- tpu-interpret (NaN-filled memory) reports the interleave step's reads of staging rows
  past a page run's length, never written by its DMA and never copied out (whole steps of
  step_rows rows), attributed to no kernel line: check it on interpret or a TPU.
- Not covered: the attention after the append (flash_attn_with_kvcache's), NaN payloads.
"""


def config_events(case: FlywheelAppendCase) -> list[str]:
    """Inactive sequences past num_active (the op's events come first)."""
    return ["inactive-seqs"] if case.inactive_seqs else []


def cases(*, without: frozenset[str] = frozenset()) -> Any:
    """The family's strategy (:func:`.cases.flywheel_append_cases`)."""
    return flywheel_append_cases()


def seed_cases(without: frozenset[str]) -> list[FlywheelAppendCase]:
    """Hand-made: a write over three pages crossing two edges next to a decode step into a
    page's last slot and a sequence writing nothing, with two inactive sequences."""
    return [FlywheelAppendCase(dtype="bfloat16", seed=1, cache_lens=(100, 127, 9),
                               new_lens=(200, 1, 0), page_size=128, pages_per_seq=3,
                               kv_heads=2, head_dim=128, spare_pages=1, pad_rows=3,
                               inactive_seqs=2)]


FAMILY = Family(
    name="flywheel-tpu-ragged-append",
    summary=library.summary("ragged paged KV-cache append (flash_attn_with_kvcache's "
                            "writer: packed new tokens into 128-token pages, inactive "
                            "sequences ignored; the rest of the cache bit-exact)"),
    case_type=FlywheelAppendCase,
    cases=cases,
    **_kernel.ADAPTER.fields(),
    # lowers-for-tpu as on a v6e: tracing asks the chip; the library plans for v6e's VMEM
    # off a TPU.
    **kv_write_record(traceable=_kernel.traceable, config_events=config_events,
                      config_modes=frozenset({"inactive-seqs"}),
                      tpu_device_kind="TPU v6 lite"),
    contract=CONTRACT,
    seed_cases=seed_cases,
    export=export,
    kernels=KernelExpectation(forward=1),
    requires=library.REQUIRES,
)
