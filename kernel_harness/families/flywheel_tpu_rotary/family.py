"""The flywheel-tpu-rotary family: flywheel-tpu 0.3.0's fused RoPE (``pallas.rotary``:
``prepare_rotary``'s table gather by packed positions and ``rotate_tile``'s float32
rotation of a staged tile), judged against the rotary op's reference from the
definition. Forward only: the library has no rotary backward."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from kernel_harness.core.elements import ElementBound
from kernel_harness.core.tolerance import ToleranceTable
from kernel_harness.families.flywheel_tpu import library
from kernel_harness.families.flywheel_tpu_rotary import kernel as _kernel
from kernel_harness.families.flywheel_tpu_rotary.cases import (
    PARTIAL,
    FlywheelRotaryCase,
    flywheel_rotary_cases,
)
from kernel_harness.families.flywheel_tpu_rotary.export import export
from kernel_harness.ops.rotary.record import rotary_record
from kernel_harness.records.bad_input import BadInput
from kernel_harness.records.blocks import block_variants
from kernel_harness.records.family import Family
from kernel_harness.records.kernels import KernelExpectation
from kernel_harness.records.outside import OutsideKernel

TOLERANCES = ToleranceTable.of_limits({
    ("float32", "out"): (2e-6, "float32 tables (the definition's float64 cos/sin rounded "
                         "once, 6e-8) and two float32 products and a sum per element; "
                         "worst observed 5.8e-8 (interpret, jax 0.12.0.1); a table row one "
                         "position off errs ~1, an angle computed in float32 at positions "
                         "past 2^16 ~4e-3"),
    ("bfloat16", "out"): (8e-3, "the rotation in float32 from exact bfloat16 inputs, the "
                          "result rounded once to bfloat16: at most 2^-8 = 3.9e-3 of an "
                          "element (half an ulp just above a power of two), hence of its "
                          "slice; worst observed 2.3e-3 (interpret, jax 0.12.0.1); the limit "
                          "is 2x the bound"),
}, per_element={
    ("float32", "out"): ElementBound(ulps=1.0, floor=4 * 2.0**-24, reason=(
        "two float32 products and a sum from float32 tables: within 1 ulp of the reference's "
        "own float32 rotation, and 2^-24 of the terms where they cancel (worst 0.37 of that "
        "beyond 1 ulp in 16 interpret cases, jax 0.12.1); floor 4x")),
    ("bfloat16", "out"): ElementBound(ulps=1.0, floor=4 * 2.0**-24, reason=(
        "the design the contract states: the rotation in float32, rounded once to bfloat16 "
        "(half an ulp, and one where the float32 result sits at a rounding boundary; worst "
        "1.0 ulp in 15 interpret cases, jax 0.12.1); bfloat16 coefficients or products "
        "rounded before the sum err up to 2 ulp")),
})

CONTRACT = f"""\
flywheel-tpu {library.TESTED_VERSION} pallas.rotary: prepare_rotary(cos, sin, ...,
cu_q=cu_seqlens, seqused_k=seq_ends, rotate_k=False) and rotate_tile(tile, coefficients,
interleaved=, head_dim_minor=); install: {library.INSTALL} (Python >= 3.12).
- The op: token j of sequence i (packed rows cu_seqlens[i]..) sits at position
  seq_ends[i] - len_i + j (a chunk of queries after the sequence's cached tokens, as the
  library positions Q over a paged cache); its pair (d, d + head_dim/2) (split, rotate-half)
  or (2d, 2d + 1) (interleaved) rotates by position * base^(-2d/head_dim). The reference
  computes the angles and their cos/sin in float64 from the positions (not from the
  tables the kernel takes: float32 [table_len, head_dim/2], the same definition rounded).
- cu_seqlens and seq_ends reach prepare_rotary as concrete arrays (it checks them while
  tracing; traced, it checks them on the device through an ordered host callback, which
  a CPU cannot lower for a TPU: lowers-for-tpu could not run).
- The library rotates Q/K tiles inside its attention kernels; here our Pallas kernel
  stages one head's (block_tokens, head_dim) tile per program, or its transpose
  (head_dim_minor False), and calls rotate_tile on it with prepare_rotary's packed
  coefficients, as those kernels do. Pad tokens after the last sequence are rotated at
  position 0 by the library and are outside the contract.
- Positions up to 2^16 + 4096 + 40 (odd offsets, several sequences); head_dim 64 or 128
  (the library wants a multiple of 16 and the whole head: partial rotary is a bad input);
  float32 and bfloat16 x, float32 tables; the rotation in float32, rounded once.
- Forward only: the library's rotary has no backward (its attention's gradient raises
  NotImplementedError); the op's dx is checked on kernels that have one.
"""


def config_events(case: FlywheelRotaryCase) -> list[str]:
    """The tile: its layout, several tiles, a partial last tile (the op's events come
    first: :func:`~kernel_harness.ops.rotary.record.rotary_record`)."""
    ev = ["head-dim-minor" if case.head_dim_minor else "token-minor"]
    if case.tokens > case.block_tokens:
        ev.append("multi-tile")
    if case.tokens % case.block_tokens:
        ev.append("partial-tile")
    return ev


def cases(*, without: frozenset[str] = frozenset()) -> Any:
    """The family's strategy (:func:`.cases.flywheel_rotary_cases`)."""
    return flywheel_rotary_cases()


def seed_cases(without: frozenset[str]) -> list[FlywheelRotaryCase]:
    """Hand-made: interleaved bfloat16 past 2^16 with an odd offset over partial tiles,
    and split float32 transposed tiles over three sequences with pad tokens."""
    return [
        FlywheelRotaryCase(dtype="bfloat16", seed=1, seq_lens=(13, 30), offsets=(65541, 7),
                           heads=2, head_dim=128, rotary_dim=128, pairing="interleaved",
                           pad_tokens=2, head_dim_minor=True, block_tokens=16),
        FlywheelRotaryCase(dtype="float32", seed=2, seq_lens=(5, 40, 1), offsets=(0, 69999, 3),
                           heads=3, head_dim=64, rotary_dim=64, pairing="split",
                           base=500000.0, pad_tokens=3, head_dim_minor=False,
                           block_tokens=128),
    ]


def _call(rotary_dim: int, *, head_dim: int = 128, table_dtype: Any = jnp.float32,
          sin_rows: int | None = None) -> Any:
    """The adapter's call on small arrays with tables of ``rotary_dim`` / 2 columns."""
    def call() -> Any:
        x = jnp.ones((8, 1, head_dim), jnp.bfloat16)
        cos = jnp.ones((16, rotary_dim // 2), table_dtype)
        sin = jnp.ones((sin_rows or 16, rotary_dim // 2), table_dtype)
        return _kernel.rotary(x, cos, sin, cu_seqlens=np.asarray([0, 8], np.int32),
                              seq_ends=np.asarray([10], np.int32), interleaved=False,
                              head_dim_minor=True, block_tokens=8)
    return call


def bad_inputs() -> list[BadInput]:
    """Configurations prepare_rotary must refuse, with its messages (none where flywheel-tpu
    cannot be imported: ``list`` says why the family has no backend there)."""
    if library.unavailable_reason():
        return []
    return [
        BadInput("partial rotary (rotary_dim < head_dim)", _call(64),
                 r"partial rotary is not supported"),
        BadInput("rotary_dim not a multiple of 16", _call(8, head_dim=8),
                 r"divisible by 16"),
        BadInput("tables in neither x's dtype nor float32", _call(128, table_dtype=jnp.float16),
                 r"share Q's dtype or be float32"),
        BadInput("cos and sin of different shapes", _call(128, sin_rows=12),
                 r"same 2-D shape"),
    ]


FAMILY = Family(
    name="flywheel-tpu-rotary",
    summary=library.summary("fused RoPE (prepare_rotary + rotate_tile, split or "
                            "interleaved pairs, packed positions; forward only)"),
    case_type=FlywheelRotaryCase,
    cases=cases,
    **_kernel.ADAPTER.fields(),
    # Forward only; block-size-invariance over the tile's block sizes.
    **rotary_record(gradients=False, partial=PARTIAL, traceable=_kernel.traceable,
                    block_variants=block_variants({"block_tokens": (8, 16, 128, 256)}),
                    config_events=config_events,
                    config_modes=frozenset({"head-dim-minor", "token-minor", "multi-tile",
                                            "partial-tile"})),
    tolerances=TOLERANCES,
    contract=CONTRACT,
    seed_cases=seed_cases,
    export=export,
    kernels=KernelExpectation(forward=1),
    outside_kernel=OutsideKernel(),
    bad_inputs=bad_inputs,
    requires=library.REQUIRES,
)
