"""The flywheel-tpu-kv-cache-write family: flywheel-tpu 0.3.0's paged KV-cache writer
(``pallas.kv_cache_write.write_kv_cache_pages``), judged against the kv-cache write op's
reference with the whole cache compared bit for bit."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from kernel_harness.families.flywheel_tpu import library
from kernel_harness.families.flywheel_tpu_kv_cache_write import kernel as _kernel
from kernel_harness.families.flywheel_tpu_kv_cache_write.cases import (
    FlywheelKvWriteCase,
    flywheel_kv_write_cases,
    pieces_per_block,
)
from kernel_harness.families.flywheel_tpu_kv_cache_write.export import export
from kernel_harness.ops.kv_cache_write.record import kv_write_record
from kernel_harness.records.bad_input import BadInput
from kernel_harness.records.family import Family
from kernel_harness.records.kernels import KernelExpectation
from kernel_harness.records.outside import OutsideKernel

CONTRACT = f"""\
flywheel-tpu {library.TESTED_VERSION} pallas.kv_cache_write.write_kv_cache_pages(k, v,
kv_cache, slices, num_slices, interpret=...); install: {library.INSTALL} (Python >= 3.12).
- The op: sequence i has cache_lens[i] tokens cached and new_lens[i] new ones (rows
  sum(new_lens[:i]) .. of k and v); new token j lands at position cache_lens[i] + j, which
  is slot p % page_size of page block_table[i, p // page_size]. Every other element of the
  cache (other slots of the same pages, pages of the table past the write, spare pages no
  table row names) stays as it was, bit for bit; pad rows of k and v past the new tokens
  are never written. new_lens[i] = 0 (a sequence writing nothing) is drawn, and calls
  that write nothing at all.
- The cache is (pages, page_size, 2 * kv_heads, head_dim) bfloat16 (the only dtype the
  writer takes), a token's rows interleaving each kv head's K and V [k0, v0, k1, v1, ...];
  page_size 128 (issue 56's pages), head_dim 128 or 256, 1 to 16 kv heads.
- The writer is told the write as pieces, (cache_row_start, new_row_start, length) in
  rows of the flat cache and of k/v, each inside one page, num_slices of them; the
  harness cuts them at page edges, at random points or per token (more pieces than one
  writer program stages: 64 for <= 4 kv heads, 16 for 16), in order or shuffled, with
  junk columns past num_slices that must be ignored.
- Compared exactly: the whole cache as values and as bits (kv_cache_bits); the old cache
  is poisoned with magnitudes in [64, 1024), and both old and new data carry signed zeros
  and subnormals (the writer moves the bits as integers).
- tpu-interpret (NaN-filled memory, race detection) reports two things on this writer,
  neither a wrong result, so check it on interpret or a TPU: the interleave step reads
  staging rows past a piece's length that its DMA never wrote (whole steps of step_rows
  rows; those rows are never copied out), and the race detector reports a race it
  attributes to no access, logging a live piece's cache write (rows 0:64) beside a
  padding piece's zero-length write at the same row (rows 0:0). Not explained yet: two
  such DMAs alone in a kernel of ours report no race (jax 0.10.2 and 0.12.0.1).
- Not covered: NaN payloads in K/V or the cache; float16/float32 (the writer refuses
  them, a bad input); pieces that are not the op's (overlapping pieces).
"""


def config_events(case: FlywheelKvWriteCase) -> list[str]:
    """How the pieces are told: split, shuffled, junk columns, more pieces than one writer
    program stages (the op's events come first: :func:`~kernel_harness.ops.kv_cache_write.
    record.kv_write_record`)."""
    ev = [f"split:{case.split}"]
    if case.shuffled:
        ev.append("shuffled-pieces")
    if case.junk_columns:
        ev.append("junk-columns")
    if len(case.pieces()) > pieces_per_block(case.page_size, case.kv_heads, case.head_dim):
        ev.append("multi-piece-block")
    return ev


def cases(*, without: frozenset[str] = frozenset()) -> Any:
    """The family's strategy (:func:`.cases.flywheel_kv_write_cases`)."""
    return flywheel_kv_write_cases()


def seed_cases(without: frozenset[str]) -> list[FlywheelKvWriteCase]:
    """Hand-made: one token per piece past one program's 64 pieces (a write crossing a
    page edge and one ending at a page end, a sequence writing nothing), and 16 kv heads
    (16 pieces a program) with shuffled pieces, junk columns and an empty prefix."""
    return [
        FlywheelKvWriteCase(dtype="bfloat16", seed=1, cache_lens=(100, 7, 60),
                            new_lens=(40, 0, 68), page_size=128, pages_per_seq=2,
                            kv_heads=1, head_dim=128, spare_pages=1, pad_rows=2,
                            split="token", junk_columns=3),
        FlywheelKvWriteCase(dtype="bfloat16", seed=2, cache_lens=(0, 127, 250),
                            new_lens=(130, 2, 6), page_size=128, pages_per_seq=3,
                            kv_heads=16, head_dim=128, split="random", shuffled=True,
                            junk_columns=3),
    ]


def _writer(k_shape: tuple[int, ...], cache_shape: tuple[int, ...],
            pieces: list[tuple[int, int, int]], num: int | None = None, *,
            dtype: Any = jnp.bfloat16, v_shape: tuple[int, ...] | None = None) -> Any:
    """A call of the writer on small arrays (interpreted)."""
    def call() -> Any:
        k = jnp.zeros(k_shape, dtype)
        v = jnp.zeros(v_shape or k_shape, dtype)
        slices = jnp.asarray(np.asarray(pieces, np.int32).T)
        n = jnp.asarray([len(pieces) if num is None else num], jnp.int32)
        return _kernel.write_kv_cache_pages(k, v, jnp.zeros(cache_shape, dtype), slices, n,
                                            interpret=True)
    return call


def bad_inputs() -> list[BadInput]:
    """Configurations the writer must refuse, and what it does (none where flywheel-tpu
    cannot be imported: ``list`` says why the family has no backend there)."""
    if library.unavailable_reason():
        return []
    cache = (2, 128, 2, 128)
    return [
        BadInput("float32 operands", _writer((4, 1, 128), cache, [(0, 0, 4)],
                                             dtype=jnp.float32), r"bfloat16 only"),
        BadInput("head_dim not a multiple of 128", _writer((4, 1, 64), (2, 128, 2, 64),
                                                           [(0, 0, 4)]),
                 r"head_dim must be a multiple of 128"),
        BadInput("v shaped unlike k", _writer((4, 1, 128), cache, [(0, 0, 4)],
                                              v_shape=(5, 1, 128)), r"k and v must be"),
        BadInput("page_size below one interleave step", _writer((4, 1, 128), (2, 8, 2, 128),
                                                                [(0, 0, 4)]),
                 r"does not divide page_size"),
        BadInput("a piece longer than a page", _writer((200, 1, 128), cache, [(0, 0, 200)]),
                 r"(?i)piece|page", status="unclear",
                 finding="never checked: in interpret mode the interpreter's out-of-bounds "
                 "write into the writer's one-page VMEM staging stops it (a CpuCallback "
                 "error naming a buffer); on a TPU the DMA runs past the staging buffer"),
        BadInput("num_slices beyond the table's columns",
                 _writer((4, 1, 128), cache, [(0, 0, 4)], num=3), r"num_slices",
                 status="silent",
                 finding="never checked: the table is padded with empty pieces to a whole "
                 "block, so the writer reads them (length 0) and says nothing; past the "
                 "padded block it would read outside the table"),
    ]


FAMILY = Family(
    name="flywheel-tpu-kv-cache-write",
    summary=library.summary("paged KV-cache writer (new tokens into 128-token pages of a "
                            "merged K/V cache; the rest of the cache bit-exact)"),
    case_type=FlywheelKvWriteCase,
    cases=cases,
    **_kernel.ADAPTER.fields(),
    **kv_write_record(traceable=_kernel.traceable, config_events=config_events,
                      config_modes=frozenset({"split:page", "split:random", "split:token",
                                              "shuffled-pieces", "junk-columns",
                                              "multi-piece-block"})),
    contract=CONTRACT,
    seed_cases=seed_cases,
    export=export,
    kernels=KernelExpectation(forward=1),
    outside_kernel=OutsideKernel(),
    bad_inputs=bad_inputs,
    requires=library.REQUIRES,
)
