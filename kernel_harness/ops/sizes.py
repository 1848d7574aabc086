"""Strategy pieces any op can use: sizes that divide a block and sizes that do not.

A blocked kernel's bugs live at block edges: a last block only partly filled, one block
only, several. :func:`block_aware_sizes` draws each on purpose, and shrinks towards one
whole block.
"""

from __future__ import annotations

from hypothesis import strategies as st


@st.composite
def block_aware_sizes(draw: st.DrawFn, block: int, *, max_blocks: int = 3,
                      partial: bool = True) -> int:
    """A size for an axis tiled by ``block``: 1 to ``max_blocks`` whole blocks, or (with
    ``partial``) a last block only partly filled (a size below one block included).
    Shrinks towards one whole block."""
    if block < 1 or max_blocks < 1:
        raise ValueError(f"block and max_blocks must be >= 1, got {block}, {max_blocks}")
    blocks = draw(st.integers(1, max_blocks), label="blocks")
    if not partial or block == 1 or not draw(st.booleans(), label="partial last block"):
        return blocks * block
    return (blocks - 1) * block + draw(st.integers(1, block - 1), label="rows of the last block")


def block_events(size: int, block: int, axis: str = "row") -> list[str]:
    """What a size reaches against its block: ``multi-{axis}-block``,
    ``partial-last-{axis}-block`` (and ``{axis}s-below-one-block``)."""
    events = []
    if size > block:
        events.append(f"multi-{axis}-block")
    if size % block:
        events.append(f"partial-last-{axis}-block")
    if size < block:
        events.append(f"{axis}s-below-one-block")
    return events
