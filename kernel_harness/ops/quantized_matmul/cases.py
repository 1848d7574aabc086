"""Cases of the quantized matmul op and the strategy.

``x [n_batch, n_in]`` (float32 or bfloat16) times int8 weights ``w_q [n_out, n_in]`` with a
float32 scale per output channel ``w_scale [n_out]``; with ``x_q_dtype="int8"`` the kernel
quantizes each row of x on the fly (scale = max|x_row| / 127), multiplies in int32 and
rescales. The weights and their scales are made here, from float weights, by rounding to
nearest (the harness's own quantization, never the package's helpers). The kernel tiles
the problem in ``batch_block`` x ``out_block`` x ``in_block`` blocks and pads sizes that do
not divide them. Rows of x are drawn with a power-of-two quantization scale (below): the
quantized activations are then exact, so a one-step difference is a contract difference
(truncation against rounding), never the last bit of a division.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import Case, cast, check_sizes
from kernel_harness.ops.sizes import block_aware_sizes

X_Q_DTYPES: tuple[str, ...] = ("int8", "none")
#: Every row's largest magnitude, 127 * 2^-5: seven significant bits, exact in bfloat16.
ROW_MAX = 127 * 2.0**-5


@dataclasses.dataclass(frozen=True, kw_only=True)
class QmmCase(Case):
    """One quantized matmul.

    Attributes:
      n_batch, n_in, n_out: x is [n_batch, n_in], w_q [n_out, n_in], out [n_batch, n_out].
      x_q_dtype: ``int8`` (activations quantized per row in the kernel) or ``none``.
      batch_block, out_block, in_block: the kernel's tiling.
    """

    n_batch: int
    n_in: int
    n_out: int
    x_q_dtype: str = "int8"
    batch_block: int = 8
    out_block: int = 128
    in_block: int = 128

    DYNAMIC_FIELDS: ClassVar[frozenset[str]] = frozenset({"seed"})

    def __post_init__(self) -> None:
        super().__post_init__()
        check_sizes(self, "n_batch", "n_in", "n_out", "batch_block", "out_block", "in_block")
        if self.x_q_dtype not in X_Q_DTYPES:
            raise ValueError(f"x_q_dtype must be one of {X_Q_DTYPES}, got {self.x_q_dtype!r}")
        if self.batch_block % 128 and self.n_batch > self.batch_block:
            raise ValueError(
                f"batch_block {self.batch_block} with n_batch {self.n_batch}: the kernel's "
                "row-max block (1, batch_block) lowers for TPU only when batch_block is a "
                "multiple of 128 or one block holds the whole batch")

    def blocks(self) -> tuple[int, int, int]:
        """Blocks of the padded problem along batch, out and in."""
        return (-(-self.n_batch // self.batch_block), -(-self.n_out // self.out_block),
                -(-self.n_in // self.in_block))

    def shape_summary(self) -> str:
        """``x=(16,256) w=(384,256) int8 blocks=8x128x128``."""
        return (f"x=({self.n_batch},{self.n_in}) w=({self.n_out},{self.n_in}) x_q="
                f"{self.x_q_dtype} blocks={self.batch_block}x{self.out_block}x{self.in_block}")

    def materialize(self) -> dict[str, np.ndarray]:
        """x in the case's dtype, each row scaled so that its largest magnitude is exactly
        :data:`ROW_MAX` (its quantization scale is then the power of two 2^-5 in any
        arithmetic, and x / scale is exact: truncation and rounding are judged without
        boundary noise); w_q int8 and w_scale float32 from float weights (per output
        channel: scale = max|w| / 127, w_q = round-to-nearest(w / scale))."""
        rng = self.rng()
        z = rng.standard_normal((self.n_batch, self.n_in))
        z *= ROW_MAX / np.abs(z).max(axis=1, keepdims=True)
        x = cast(z, self.dtype)
        rows = np.arange(self.n_batch)
        peak = np.abs(z).argmax(axis=1)
        x[rows, peak] = np.sign(z[rows, peak]) * ROW_MAX  # exact in float32 and bfloat16
        w = rng.standard_normal((self.n_out, self.n_in)).astype(np.float32)
        w_scale = (np.abs(w).max(axis=1) / np.float32(127)).astype(np.float32)
        w_q = np.clip(np.rint(w / w_scale[:, None]), -127, 127).astype(np.int8)
        return {"x": x, "w_q": w_q, "w_scale": w_scale}


def qmm_events(case: QmmCase) -> list[str]:
    """The kernel's paths: activation quantization, the int32 accumulator kept across
    in-blocks, the quantized x kept across out-blocks, padding in each dimension."""
    nb, no, ni = case.blocks()
    ev = [case.dtype, f"x_q:{case.x_q_dtype}"]
    if ni > 1:
        ev.append("accumulate-over-in-blocks")
    if case.x_q_dtype != "none" and ni == 1 and no > 1:
        ev.append("quantized-x-reused-across-out-blocks")
    if case.x_q_dtype != "none" and ni > 1:
        ev.append("x-quantized-per-in-block")
    for name, size, block in (("batch", case.n_batch, case.batch_block),
                              ("out", case.n_out, case.out_block),
                              ("in", case.n_in, case.in_block)):
        if size % block:
            ev.append(f"padded-{name}")
    if nb > 1:
        ev.append("multi-batch-block")
    return ev


@st.composite
def qmm_cases(draw: st.DrawFn, *, dtypes: tuple[str, ...] = ("float32", "bfloat16")
              ) -> QmmCase:
    """Valid :class:`QmmCase` s, tilings that lower for TPU: one batch block of 8-32 rows
    (whole or padded) or 1-2 blocks of 128, blocks of 128-256 columns with 1-2 (out) or 1-3
    (in) blocks whole or with a padded last one, activations quantized or not. Shrinks
    towards float32, int8 activations, one block each."""
    batch_block = draw(st.sampled_from((8, 16, 32, 128)))
    out_block = draw(st.sampled_from((128, 256)))
    in_block = draw(st.sampled_from((128, 256)))
    n_batch = (draw(block_aware_sizes(batch_block, max_blocks=2)) if batch_block >= 128
               else draw(block_aware_sizes(batch_block, max_blocks=1)))
    return QmmCase(
        dtype=draw(st.sampled_from(dtypes)), seed=draw(st.integers(0, 2**31 - 1)),
        x_q_dtype=draw(st.sampled_from(X_Q_DTYPES)),
        batch_block=batch_block, out_block=out_block, in_block=in_block,
        n_batch=n_batch,
        n_out=draw(block_aware_sizes(out_block, max_blocks=2)),
        n_in=draw(block_aware_sizes(in_block, max_blocks=3)))
