"""Cases of the Pallas GPU (Triton) ``softmax`` kernel (last axis) and the strategy."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import DTYPES, Case, cast

#: Row lengths: powers of two and lengths one past / short of one (the kernel loads one
#: block of next_pow2(n) lanes and masks the rest with -inf), 1 and odd sizes.
ROW_LENGTHS: tuple[int, ...] = (100, 1, 2, 3, 31, 32, 33, 127, 128, 129, 1000, 1024, 1025)
#: Leading shapes: the kernel is vmapped once per leading axis (none: one row, no vmap).
LEADING: tuple[tuple[int, ...], ...] = ((2, 3), (), (1,), (5,), (2, 1, 3))
#: (offset, scale) of the logits per dtype: O(1), large spreads (near one-hot rows) and
#: large offsets (every exp overflows without the max subtraction).
LOGITS: dict[str, tuple[tuple[float, float], ...]] = {
    "float32": ((0.0, 1.0), (0.0, 30.0), (1000.0, 1.0), (-300.0, 5.0), (0.0, 1e4)),
    "bfloat16": ((0.0, 1.0), (0.0, 30.0), (1000.0, 1.0), (-300.0, 5.0), (0.0, 1e4)),
    "float16": ((0.0, 1.0), (0.0, 30.0), (1000.0, 1.0), (-300.0, 5.0), (0.0, 3e3)),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class SoftmaxCase(Case):
    """One ``softmax(x)`` over the last axis of x [*leading, n].

    Attributes:
      leading: the leading shape (``()``: x is one row).
      n: row length.
      offset, scale: x = offset + scale * (standard normal), rounded to the dtype.
      masked_prefix: the first ``masked_prefix`` logits of every row are -inf (a masked
        prefix, as attention and sampling feed a softmax: their probabilities are exactly
        0); at most ``n - 1``, so each row keeps a finite logit (a row of only -inf has no
        softmax).
    """

    leading: tuple[int, ...]
    n: int
    offset: float = 0.0
    scale: float = 1.0
    masked_prefix: int = 0

    DYNAMIC_FIELDS: ClassVar[frozenset[str]] = frozenset({"seed", "offset", "scale",
                                                          "masked_prefix"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if any(d < 1 for d in self.leading):
            raise ValueError(f"leading sizes must be >= 1, got {self.leading!r}")
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if not self.scale > 0:
            raise ValueError(f"scale must be > 0, got {self.scale}")
        if not 0 <= self.masked_prefix < self.n:
            raise ValueError(f"masked_prefix must be in [0, n - 1 = {self.n - 1}] (a row "
                             f"needs a finite logit), got {self.masked_prefix}")
        big = abs(self.offset) + 6 * self.scale
        if self.dtype == "float16" and big > 6e4:
            raise ValueError(f"float16 logits up to {big:g} overflow (max 65504)")

    @property
    def rows(self) -> int:
        return int(np.prod(self.leading, dtype=np.int64))

    def shape_summary(self) -> str:
        masked = f" masked={self.masked_prefix}" if self.masked_prefix else ""
        return f"x={(*self.leading, self.n)} logits~{self.offset:g}+{self.scale:g}z{masked}"

    def materialize(self) -> dict[str, np.ndarray]:
        """x [*leading, n] in the case's dtype (the reference sees the rounded values), its
        first ``masked_prefix`` logits of each row -inf."""
        z = self.rng().standard_normal((*self.leading, self.n))
        x = cast(self.offset + self.scale * z, self.dtype)
        x[..., :self.masked_prefix] = -np.inf
        return {"x": x}


#: The lanes of one block of a row kernel (a prefix that long masks a whole block).
LANES = 128


def masked_prefixes(n: int) -> st.SearchStrategy[int]:
    """How many leading logits of each row are -inf: none half the time; else a whole
    leading 128-lane block (rows longer than a block), all but the last logit, or any
    length. Shrinks towards none."""
    if n == 1:
        return st.just(0)
    some = [st.integers(1, n - 1), st.just(n - 1), *([st.just(LANES)] if n > LANES else [])]
    return st.one_of(st.just(0), st.just(0), *some)


@st.composite
def softmax_cases(draw: st.DrawFn, *, dtypes: tuple[str, ...] = DTYPES) -> SoftmaxCase:
    """Valid :class:`SoftmaxCase` s: all three dtypes, row lengths at and around powers of
    two, 0-3 leading axes, logits O(1), spread by up to 1e4 or offset by +-1000, half of
    them with a masked (-inf) prefix (:func:`masked_prefixes`). Shrinks towards float32,
    n=100, 2x3 rows, O(1) logits, nothing masked."""
    dtype = draw(st.sampled_from(dtypes))
    offset, scale = draw(st.sampled_from(LOGITS[dtype]))
    seed = draw(st.integers(0, 2**31 - 1))
    leading, n = draw(st.sampled_from(LEADING)), draw(st.sampled_from(ROW_LENGTHS))
    return SoftmaxCase(dtype=dtype, seed=seed, leading=leading, n=n, offset=offset,
                       scale=scale, masked_prefix=draw(masked_prefixes(n)))


def softmax_data_draws(case: SoftmaxCase) -> st.SearchStrategy[SoftmaxCase]:
    """Cases of ``case``'s compiled program (``Family.data_draws``): another data seed,
    logit offset/scale and masked prefix, drawn as :func:`softmax_cases` draws them."""
    return st.builds(
        lambda seed, logits, masked: dataclasses.replace(
            case, seed=seed, offset=logits[0], scale=logits[1], masked_prefix=masked),
        st.integers(0, 2**31 - 1), st.sampled_from(LOGITS[case.dtype]),
        masked_prefixes(case.n))

