"""The row-wise op's case vocabulary: an op applied to each row of ``[rows, width]``
inputs, tiled over rows by ``block_rows`` (a fused rotary embedding, an activation, a
gated product, a row scaling), with per-row tables beside the data (cos/sin).

A user's op names its inputs once, as data, on a subclass::

    class RopeCase(RowwiseCase):
        OPERANDS = {"x": Operand(), "cos": Operand(cols=half, differentiable=False),
                    "sin": Operand(cols=half, differentiable=False)}
        WIDTH_MULTIPLE = 2

and :func:`rowwise_cases` draws valid cases of it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import Case, cast, check_sizes
from kernel_harness.ops.sizes import block_aware_sizes, block_events


def same_width(width: int) -> int:
    """The operand has the case's full width (the default)."""
    return width


def half(width: int) -> int:
    """The operand has half the case's width (the cos/sin tables of a rotary embedding)."""
    return width // 2


@dataclasses.dataclass(frozen=True)
class Operand:
    """One input of a row-wise op, as data.

    Attributes:
      cols: its number of columns, from the case's width (default: the width).
      per_row: a ``[rows, cols]`` array (a per-row table); False: one ``[cols]`` vector
        shared by every row (a weight).
      differentiable: the vjp differentiates it: its gradient ``d<name>`` is an output,
        checked like the forward output.
      scale: the standard deviation of its values (normal, rounded to the case's dtype).
    """

    cols: Callable[[int], int] = same_width
    per_row: bool = True
    differentiable: bool = True
    scale: float = 1.0

    def shape(self, rows: int, width: int) -> tuple[int, ...]:
        """The operand's shape in a case of ``rows`` x ``width``."""
        return (rows, self.cols(width)) if self.per_row else (self.cols(width),)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RowwiseCase(Case):
    """One call of a row-wise op: ``rows`` rows of ``width`` columns, ``block_rows`` rows
    per kernel block (a last block may be partial unless :attr:`PARTIAL_BLOCKS` is off).

    Subclasses declare the op's inputs (:attr:`OPERANDS`), its output's columns
    (:attr:`OUTPUT`), the width's multiple and whether partial blocks are in the
    contract. :meth:`materialize` gives every operand and ``dout``, the cotangent of the
    output."""

    rows: int
    width: int
    block_rows: int

    OPERANDS: ClassVar[Mapping[str, Operand]] = {"x": Operand()}
    #: The output's columns (``OUTPUT.cols``; its scale is that of the cotangent ``dout``).
    OUTPUT: ClassVar[Operand] = Operand()
    WIDTH_MULTIPLE: ClassVar[int] = 1
    PARTIAL_BLOCKS: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_sizes(self, "rows", "width", "block_rows")
        if self.width % self.WIDTH_MULTIPLE:
            raise ValueError(f"width must be a multiple of {self.WIDTH_MULTIPLE}, got "
                             f"{self.width}")
        if not self.PARTIAL_BLOCKS and self.rows % self.block_rows:
            raise ValueError(f"rows ({self.rows}) must be a multiple of block_rows "
                             f"({self.block_rows}): partial blocks are outside the contract")

    def shape_summary(self) -> str:
        """``rows=40 width=128 block_rows=16``."""
        return f"rows={self.rows} width={self.width} block_rows={self.block_rows}"

    def materialize(self) -> dict[str, np.ndarray]:
        """Every operand (normal, times its scale, rounded to the dtype) and ``dout``."""
        arrays = {}
        for i, (name, op) in enumerate(self.OPERANDS.items()):
            z = self.rng(i).standard_normal(op.shape(self.rows, self.width))
            arrays[name] = cast(op.scale * z, self.dtype)
        z = self.rng(len(self.OPERANDS)).standard_normal((self.rows, self.OUTPUT.cols(
            self.width)))
        arrays["dout"] = cast(self.OUTPUT.scale * z, self.dtype)
        return arrays


def rowwise_events(case: RowwiseCase) -> list[str]:
    """The dtype, the width and where the rows fall against the block."""
    return [case.dtype, f"width:{case.width}",
            *block_events(case.rows, case.block_rows)]


def rowwise_cases(case_type: type[RowwiseCase], *, blocks: tuple[int, ...] = (8, 16, 32),
                  widths: tuple[int, ...] = (128,), dtypes: tuple[str, ...] = (
                      "float32", "bfloat16"), max_blocks: int = 3) -> Callable[[], Any]:
    """The ``Family.cases`` factory of ``case_type``: a block from ``blocks``, rows that
    fill 1 to ``max_blocks`` blocks whole or leave the last one partial (when the case
    type allows it), a width from ``widths``, a dtype from ``dtypes``. Shrinks towards the
    first dtype, block and width and one whole block."""
    usable = tuple(w for w in widths if w % case_type.WIDTH_MULTIPLE == 0)
    if not usable:
        raise ValueError(f"{case_type.__name__}: no width in {widths} is a multiple of "
                         f"{case_type.WIDTH_MULTIPLE}")

    @st.composite
    def cases(draw: st.DrawFn) -> RowwiseCase:
        block = draw(st.sampled_from(blocks), label="block_rows")
        return case_type(
            dtype=draw(st.sampled_from(dtypes), label="dtype"),
            block_rows=block, width=draw(st.sampled_from(usable), label="width"),
            rows=draw(block_aware_sizes(block, max_blocks=max_blocks,
                                        partial=case_type.PARTIAL_BLOCKS), label="rows"),
            seed=draw(st.integers(0, 2**31 - 1), label="seed"))

    return cases
