"""The rmsnorm case description and the Hypothesis strategy that draws it."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st

from kernel_harness import Case

# Few static shapes: each (rows, hidden, block_rows, dtype) compiles once.
HIDDEN = (128, 256)
ROWS = (8, 32)
#: x_scale 1e-3 makes mean(x**2) ~ 1e-6, the size of eps: where eps must sit inside the sqrt.
X_SCALES = (1.0, 1e-3, 100.0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RmsNormCase(Case):
    """One RMSNorm example: x [rows, hidden] (scaled by x_scale), w [hidden], eps, the
    kernel's row block, and the data seed."""

    rows: int
    hidden: int
    block_rows: int
    eps: float = 1e-6
    x_scale: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.rows % self.block_rows:
            raise ValueError(f"block_rows={self.block_rows} must divide rows={self.rows}")

    def shape_summary(self) -> str:
        """``x=(rows,hidden) block_rows=B`` for failure lines."""
        return f"x=({self.rows},{self.hidden}) block_rows={self.block_rows}"

    def materialize(self) -> dict[str, np.ndarray]:
        """x, w and the output cotangent dy, rounded to the case's dtype."""
        import jax.numpy as jnp

        rng = self.rng()

        def rounded(a: np.ndarray) -> np.ndarray:
            return np.asarray(jnp.asarray(a, jnp.float32).astype(self.dtype))

        return {
            "x": rounded(self.x_scale * rng.standard_normal((self.rows, self.hidden))),
            "w": rounded(1.0 + 0.5 * rng.standard_normal(self.hidden)),
            "dy": rounded(rng.standard_normal((self.rows, self.hidden))),
        }


@st.composite
def rmsnorm_cases(draw: st.DrawFn) -> RmsNormCase:
    """Rows and row blocks (one block or several), hidden sizes, dtypes, x scales."""
    rows = draw(st.sampled_from(ROWS))
    block_rows = draw(st.sampled_from([b for b in (8, 32) if rows % b == 0]))
    return RmsNormCase(
        dtype=draw(st.sampled_from(["float32", "bfloat16"])),
        seed=draw(st.integers(0, 2**16)),
        rows=rows,
        hidden=draw(st.sampled_from(HIDDEN)),
        block_rows=block_rows,
        x_scale=draw(st.sampled_from(X_SCALES)),
    )
