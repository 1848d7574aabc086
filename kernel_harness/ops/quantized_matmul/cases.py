"""Cases of the quantized matmul op and the strategy.

``x [n_batch, n_in]`` (float32 or bfloat16) times quantized weights ``w_q [n_out, n_in]``
(int8 or float8_e4m3fn) with float32 scales: one per output channel (``w_scale [n_out]``) or,
blockwise, one per output channel and ``scale_block`` inputs (``w_scale [n_in / scale_block,
1, n_out]``). With ``x_q_dtype`` set the kernel quantizes x on the fly the same way (per
row, or per row and scale block), multiplies the quantized values and rescales. The weights
and their scales are made here, from float weights, by rounding to nearest
(:func:`~.quantize.quantize`: the harness's own quantization, never the package's helpers).
The kernel tiles the problem in ``batch_block`` x ``out_block`` x ``in_block`` blocks and
pads sizes that do not divide them. Every group of x (a row, or a row's scale block) is
drawn with a power-of-two quantization scale, 2^-7 to 2^-3 and different from group to
group (below): the quantized activations are then exact, so a one-step difference is a
contract difference (truncation against rounding), never the last bit of a division; and a
kernel that applies one group's scale to another is seen.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import Case, cast, check_sizes
from kernel_harness.ops.quantized_matmul.quantize import QMAX, quantize, stored
from kernel_harness.ops.sizes import block_aware_sizes

X_Q_DTYPES: tuple[str, ...] = ("int8", "float8_e4m3fn", "none")
W_Q_DTYPES: tuple[str, ...] = tuple(QMAX)
#: Every group of x has its largest magnitude at QMAX * 2^e of the dtype it is quantized
#: to (int8: 127 * 2^e, float8: 448 * 2^e), e drawn per group from these: seven significant
#: bits or fewer, exact in bfloat16, and the group's scale is exactly 2^e.
SCALE_EXPONENTS: tuple[int, ...] = (-7, -6, -5, -4, -3)


@dataclasses.dataclass(frozen=True, kw_only=True)
class QmmCase(Case):
    """One quantized matmul.

    Attributes:
      n_batch, n_in, n_out: x is [n_batch, n_in], w_q [n_out, n_in], out [n_batch, n_out].
      x_q_dtype: the dtype x is quantized to in the kernel (``int8``, ``float8_e4m3fn``),
        or ``none``; when quantized, the same as ``w_q_dtype`` (the kernels' pairs).
      w_q_dtype: the weights' dtype.
      scale_block: inputs per weight scale (blockwise quantization), or None: one scale per
        output channel.
      batch_block, out_block, in_block: the kernel's tiling.
    """

    n_batch: int
    n_in: int
    n_out: int
    x_q_dtype: str = "int8"
    w_q_dtype: str = "int8"
    scale_block: int | None = None
    batch_block: int = 8
    out_block: int = 128
    in_block: int = 128

    DYNAMIC_FIELDS: ClassVar[frozenset[str]] = frozenset({"seed"})

    def __post_init__(self) -> None:
        super().__post_init__()
        check_sizes(self, "n_batch", "n_in", "n_out", "batch_block", "out_block", "in_block")
        if self.w_q_dtype not in W_Q_DTYPES:
            raise ValueError(f"w_q_dtype must be one of {W_Q_DTYPES}, got {self.w_q_dtype!r}")
        if self.x_q_dtype not in (self.w_q_dtype, "none"):
            raise ValueError(
                f"x_q_dtype must be w_q_dtype ({self.w_q_dtype!r}) or 'none', got "
                f"{self.x_q_dtype!r}: the kernels quantize x to the weights' dtype")
        if self.scale_block is not None and (
                self.scale_block < 1 or self.n_in % self.scale_block
                or self.in_block % self.scale_block):
            raise ValueError(
                f"scale_block {self.scale_block} must divide n_in ({self.n_in}) and in_block "
                f"({self.in_block}): each weight scale covers whole blocks of inputs")
        if self.batch_block % 128 and self.n_batch > self.batch_block:
            raise ValueError(
                f"batch_block {self.batch_block} with n_batch {self.n_batch}: the kernel's "
                "row-max block (1, batch_block) lowers for TPU only when batch_block is a "
                "multiple of 128 or one block holds the whole batch")

    @property
    def group(self) -> int:
        """Inputs per scale: the scale block, or the whole row."""
        return self.scale_block or self.n_in

    def blocks(self) -> tuple[int, int, int]:
        """Blocks of the padded problem along batch, out and in."""
        return (-(-self.n_batch // self.batch_block), -(-self.n_out // self.out_block),
                -(-self.n_in // self.in_block))

    def shape_summary(self) -> str:
        """``x=(16,256) w=(384,256) x_q=int8 blocks=8x128x128``, with ``w=float8_e4m3fn``
        and ``scale_block=128`` where they are not int8 and per channel."""
        w = "" if self.w_q_dtype == "int8" else f" w_q={self.w_q_dtype}"
        sb = "" if self.scale_block is None else f" scale_block={self.scale_block}"
        return (f"x=({self.n_batch},{self.n_in}) w=({self.n_out},{self.n_in}) x_q="
                f"{self.x_q_dtype}{w}{sb} blocks={self.batch_block}x{self.out_block}x"
                f"{self.in_block}")

    def materialize(self) -> dict[str, np.ndarray]:
        """x in the case's dtype, each group scaled so that its largest magnitude is exactly
        QMAX * 2^e of the dtype it is quantized to, e from :data:`SCALE_EXPONENTS` per group
        (its scale is then the power of two 2^e in any arithmetic, and x / scale is exact:
        truncation and rounding are judged without boundary noise); w_q and w_scale from
        float weights quantized per output channel (and scale block) by rounding to
        nearest."""
        rng = self.rng()
        g, k = self.n_in // self.group, self.group
        qmax = QMAX[self.w_q_dtype if self.x_q_dtype == "none" else self.x_q_dtype]
        z = rng.standard_normal((self.n_batch, g, k))
        peak = qmax * np.exp2(rng.choice(SCALE_EXPONENTS, size=(self.n_batch, g, 1)))
        z *= peak / np.abs(z).max(axis=2, keepdims=True)
        at = np.abs(z).argmax(axis=2)[..., None]
        np.put_along_axis(z, at, np.sign(np.take_along_axis(z, at, axis=2)) * peak, axis=2)
        x = cast(z.reshape(self.n_batch, self.n_in), self.dtype)
        w = rng.standard_normal((self.n_out, self.n_in)).astype(np.float32)
        w_q, w_scale = quantize(w.reshape(self.n_out, g, k), self.w_q_dtype)
        w_q = stored(w_q.reshape(self.n_out, self.n_in), self.w_q_dtype)
        if self.scale_block is None:
            w_scale = w_scale[:, 0]
        else:
            w_scale = w_scale.T[:, None, :]
        return {"x": x, "w_q": w_q, "w_scale": w_scale.astype(np.float32)}


def qmm_events(case: QmmCase) -> list[str]:
    """The kernel's paths: activation and weight dtypes, blockwise scales (several per
    in-block), the accumulator kept across in-blocks, the quantized x kept across
    out-blocks, padding in each dimension."""
    nb, no, ni = case.blocks()
    ev = [case.dtype, f"x_q:{case.x_q_dtype}", f"w_q:{case.w_q_dtype}"]
    if case.scale_block is not None:
        ev.append("blockwise-scales")
        if case.in_block // case.scale_block > 1:
            ev.append("several-scales-per-in-block")
    if ni > 1:
        ev.append("accumulate-over-in-blocks")
    if case.scale_block is None and case.x_q_dtype != "none":
        if ni == 1 and no > 1:
            ev.append("quantized-x-reused-across-out-blocks")
        if ni > 1:
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
def qmm_cases(draw: st.DrawFn, *, dtypes: tuple[str, ...] = ("float32", "bfloat16"),
              w_q_dtypes: tuple[str, ...] = W_Q_DTYPES,
              quantize_x: tuple[bool, ...] = (True, False),
              scale_blocks: tuple[int, ...] = (), whole: tuple[str, ...] = ()) -> QmmCase:
    """Valid :class:`QmmCase` s, tilings that lower for TPU: one batch block of 8-32 rows
    (whole or padded) or 1-2 blocks of 128, blocks of 128-256 columns with 1-2 (out) or 1-3
    (in) blocks whole or with a padded last one, weights of each of ``w_q_dtypes`` with x
    quantized to the same dtype or not (``quantize_x``). With ``scale_blocks`` the weights
    are blockwise, a scale per one of those many inputs (dividing in_block); with
    ``whole`` ("in", "out") those sizes are whole blocks. Shrinks towards float32, int8, quantized
    x, one block each."""
    batch_block = draw(st.sampled_from((8, 16, 32, 128)))
    out_block = draw(st.sampled_from((128, 256)))
    in_block = draw(st.sampled_from((128, 256)))
    n_batch = (draw(block_aware_sizes(batch_block, max_blocks=2)) if batch_block >= 128
               else draw(block_aware_sizes(batch_block, max_blocks=1)))
    w_q_dtype = draw(st.sampled_from(w_q_dtypes))
    scale_block = draw(st.sampled_from(scale_blocks)) if scale_blocks else None
    if scale_block is not None:
        in_block = max(in_block, scale_block)
    n_in = draw(block_aware_sizes(in_block, max_blocks=3, partial="in" not in whole))
    if scale_block is not None:
        n_in = -(-n_in // scale_block) * scale_block
    return QmmCase(
        dtype=draw(st.sampled_from(dtypes)), seed=draw(st.integers(0, 2**31 - 1)),
        x_q_dtype=w_q_dtype if draw(st.sampled_from(quantize_x)) else "none",
        w_q_dtype=w_q_dtype, scale_block=scale_block,
        batch_block=batch_block, out_block=out_block, in_block=in_block,
        n_batch=n_batch, n_in=n_in,
        n_out=draw(block_aware_sizes(out_block, max_blocks=2, partial="out" not in whole)))
