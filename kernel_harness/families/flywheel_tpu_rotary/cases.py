"""flywheel-tpu-rotary's cases: the rotary op's (:mod:`kernel_harness.ops.rotary`) with
the whole head rotated (the library refuses partial rotary), rotary_dim a multiple of 16,
and how the tiles are staged (token-minor or head-dim-minor, block of tokens)."""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from kernel_harness.ops.rotary.cases import RotaryCase, rotary_fields

#: Tokens per staged tile: token-minor tiles (sublanes) in multiples of 8, head-dim-minor
#: ones (lanes) in multiples of 128.
TOKEN_MINOR_BLOCKS = (8, 16, 128)
HEAD_DIM_MINOR_BLOCKS = (128, 256)
#: Whether the strategy draws partial rotary: no, the library rotates the whole head only
#: (rotary_dim < head_dim is a bad input).
PARTIAL = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class FlywheelRotaryCase(RotaryCase):
    """The op's case (:class:`~kernel_harness.ops.rotary.cases.RotaryCase`) and the tile.

    Attributes:
      head_dim_minor: tiles staged (block_tokens, head_dim) (True) or transposed
        (head_dim, block_tokens) (False): ``rotate_tile``'s two layouts.
      block_tokens: tokens per tile (a partial last tile where it does not divide).
    """

    head_dim_minor: bool = True
    block_tokens: int = 8

    def __post_init__(self) -> None:
        super().__post_init__()
        blocks = TOKEN_MINOR_BLOCKS if self.head_dim_minor else HEAD_DIM_MINOR_BLOCKS
        if self.block_tokens not in blocks:
            raise ValueError(f"block_tokens must be one of {blocks} for head_dim_minor="
                             f"{self.head_dim_minor}, got {self.block_tokens}")


@st.composite
def flywheel_rotary_cases(draw: st.DrawFn) -> FlywheelRotaryCase:
    """The op's fields (full rotary, head_dim 64 or 128, both pairings, float32 and
    bfloat16), then the tile's layout and block."""
    fields = draw(rotary_fields(partial=PARTIAL))
    minor = draw(st.booleans())
    block = draw(st.sampled_from(TOKEN_MINOR_BLOCKS if minor else HEAD_DIM_MINOR_BLOCKS))
    return FlywheelRotaryCase(**fields, head_dim_minor=minor, block_tokens=block)
