"""Cases of the Pallas GPU (Triton) ``softmax`` kernel (last axis) and the strategy."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import ClassVar

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import DTYPES, Case, cast
from kernel_harness.ops.values import magnitudes
from kernel_harness.records.claims import Span, log_sizes

#: Row lengths: powers of two and lengths one past / short of one (the kernel loads one
#: block of next_pow2(n) lanes and masks the rest with -inf), 1 and odd sizes.
ROW_LENGTHS: tuple[int, ...] = (100, 1, 2, 3, 31, 32, 33, 127, 128, 129, 1000, 1024, 1025)
#: Leading shapes: the kernel is vmapped once per leading axis (none: one row, no vmap).
#: Up to five (rank 6): round 7 of the adversarial set scrambled rows from rank 5 on, where
#: the draws stopped at rank 4; those axes are at least 2 long (swapping an axis of 1 with
#: another moves no row).
LEADING: tuple[tuple[int, ...], ...] = ((2, 3), (), (1,), (5,), (2, 1, 3), (2, 3, 2, 2),
                                        (3, 2, 2, 1, 2))
#: (offset, scale) of the logits per dtype: O(1), large spreads (near one-hot rows), large
#: offsets (every exp overflows without the max subtraction), and rows at a mask
#: sentinel's level (-1e9; float16: near its most negative value): a row whose every key
#: an additive mask masked, its logits rounded to one value (a uniform softmax), beside
#: the -inf lanes of another mask (padding): a kernel that turns -inf into a finite
#: sentinel gives those lanes probability (round 4 of the adversarial set); and logits
#: around 1e6 (unnormalized scores; float32 still resolves 1/16 there, bfloat16 rounds a row
#: to one value: a uniform softmax): round 6 passed a softmax clamping logits to 1e5; and
#: near the dtype's largest finite values (1e37 spread by 1e36: near one-hot rows),
#: where a kernel that caps its logits anywhere gives a flatter row (round 11 capped them
#: at 4e6).
LOGITS: dict[str, tuple[tuple[float, float], ...]] = {
    "float32": ((0.0, 1.0), (0.0, 30.0), (1000.0, 1.0), (-300.0, 5.0), (0.0, 1e4),
                (-1e9, 1.0), (1e6, 1.0), (1e37, 1e36)),
    "bfloat16": ((0.0, 1.0), (0.0, 30.0), (1000.0, 1.0), (-300.0, 5.0), (0.0, 1e4),
                 (-1e9, 1.0), (1e6, 1.0), (1e37, 1e36)),
    "float16": ((0.0, 1.0), (0.0, 30.0), (1000.0, 1.0), (-300.0, 5.0), (0.0, 3e3),
                (-5.9e4, 1.0)),
}
#: Beside the menu, an offset anywhere up to this power of ten (either sign) spread by
#: anything from 0.01 to a tenth of it (float16: offset + 6 spreads stays under 65504).
ANYWHERE: dict[str, float] = {"float32": 37.0, "bfloat16": 37.0, "float16": 4.3}


@st.composite
def logits(draw: st.DrawFn, dtype: str) -> tuple[float, float]:
    """``(offset, scale)`` of a row's logits: one of the menu's regimes (:data:`LOGITS`)
    three times in four, else anywhere (:data:`ANYWHERE`)."""
    if draw(st.integers(0, 3)) < 3:
        return draw(st.sampled_from(LOGITS[dtype]))
    offset = draw(magnitudes(0.0, ANYWHERE[dtype])) * draw(st.sampled_from((1.0, -1.0)))
    top = max(math.log10(abs(offset)) - 1.0, -2.0)
    return offset, draw(magnitudes(-2.0, top))
#: The lanes of one block of a row kernel (a prefix that long masks a whole block).
LANES = 128
#: What a masked logit holds: -inf, or the finite sentinels frameworks mask with (the
#: dtype's most negative finite value, HF's -1e9): a kernel that treats only -inf as
#: masked, or overflows on a finite sentinel, is wrong exactly there (round 4 of the
#: adversarial set passed a softmax that did so). -1e9 is -inf in float16: not drawn there.
MASK_VALUES: tuple[str, ...] = ("-inf", "finfo-min", "-1e9")
#: The stream of :meth:`SoftmaxCase.rng` that places tied maxima (stream 0 draws the
#: logits, so a case without ties keeps the arrays it always had).
_TIE_STREAM = 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class SoftmaxCase(Case):
    """One ``softmax(x)`` over the last axis of x [*leading, n].

    Attributes:
      leading: the leading shape (``()``: x is one row).
      n: row length.
      offset, scale: x = offset + scale * (standard normal), rounded to the dtype.
      masked_prefix: the first ``masked_prefix`` logits of every row are -inf (a masked
        prefix, as attention and sampling feed a softmax: their probabilities are exactly
        0).
      masked_suffix: the last ``masked_suffix`` logits of every row are -inf (a causal or
        padding mask at the end of a row, as a decoder's attention rows have).
      masked_block: (start, length): logits ``start`` to ``start + length - 1`` of every
        row are -inf (a masked span anywhere in the row: a document boundary, a top-k
        filter); (0, 0) for none. The three masks together leave each row a finite logit
        (a row of only -inf has no softmax).
      tied_max: 0, or how many logits of each row (>= 2, among the unmasked ones, placed
        at random) equal the row's maximum exactly (clamped logits, repeated tokens, a
        constant fill: the max is not unique); all the unmasked ones make the row uniform.
      mask_value: what the masked logits hold (:data:`MASK_VALUES`): ``-inf``, the
        dtype's most negative finite value (``finfo-min``) or ``-1e9``; their probability
        is 0 either way.
      masked_rows: every other row (the only one, of one row) wholly at the finite
        ``mask_value`` (a padded query's row of an additive mask): its softmax is uniform.
    """

    leading: tuple[int, ...]
    n: int
    offset: float = 0.0
    scale: float = 1.0
    masked_prefix: int = 0
    masked_suffix: int = 0
    masked_block: tuple[int, int] = (0, 0)
    tied_max: int = 0
    mask_value: str = "-inf"
    masked_rows: bool = False

    DYNAMIC_FIELDS: ClassVar[frozenset[str]] = frozenset({
        "seed", "offset", "scale", "masked_prefix", "masked_suffix", "masked_block",
        "tied_max", "mask_value", "masked_rows"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if any(d < 1 for d in self.leading):
            raise ValueError(f"leading sizes must be >= 1, got {self.leading!r}")
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if not self.scale > 0:
            raise ValueError(f"scale must be > 0, got {self.scale}")
        start, length = self.masked_block
        if min(self.masked_prefix, self.masked_suffix, start, length) < 0 \
                or start + length > self.n:
            raise ValueError(f"masks must be >= 0 and the block inside the row, got prefix "
                             f"{self.masked_prefix}, suffix {self.masked_suffix}, block "
                             f"{self.masked_block} of n={self.n}")
        kept = self.kept_lanes()
        if not kept:
            raise ValueError(f"the masks leave no finite logit in a row of n={self.n} (a "
                             "row needs a finite logit)")
        if self.masked_rows and self.mask_value == "-inf":
            raise ValueError("masked_rows holds every logit of a row at a finite sentinel; "
                             "a row of -inf has no softmax (use a finite mask_value)")
        if self.tied_max and not 2 <= self.tied_max <= len(kept):
            raise ValueError(f"tied_max must be 0 or in [2, {len(kept)}] (the unmasked "
                             f"logits), got {self.tied_max}")
        if self.mask_value not in MASK_VALUES or (self.mask_value == "-1e9"
                                                  and self.dtype == "float16"):
            raise ValueError(f"mask_value must be one of {MASK_VALUES} (-1e9 is -inf in "
                             f"float16), got {self.mask_value!r} in {self.dtype}")
        big = abs(self.offset) + 6 * self.scale
        if self.dtype == "float16" and big > 6e4:
            raise ValueError(f"float16 logits up to {big:g} overflow (max 65504)")

    @property
    def rows(self) -> int:
        return int(np.prod(self.leading, dtype=np.int64))

    def masked_lanes(self) -> np.ndarray:
        """bool [n]: the lanes that are -inf in every row."""
        lane = np.arange(self.n)
        start, length = self.masked_block
        return ((lane < self.masked_prefix) | (lane >= self.n - self.masked_suffix)
                | ((lane >= start) & (lane < start + length)))

    def kept_lanes(self) -> list[int]:
        """The lanes left finite by the masks."""
        return np.flatnonzero(~self.masked_lanes()).tolist()

    def shape_summary(self) -> str:
        text = f"x={(*self.leading, self.n)} logits~{self.offset:g}+{self.scale:g}z"
        if self.masked_prefix:
            text += f" masked={self.masked_prefix}"
        if self.masked_suffix:
            text += f" masked_suffix={self.masked_suffix}"
        if self.masked_block[1]:
            text += f" masked_block={self.masked_block[0]}+{self.masked_block[1]}"
        if self.tied_max:
            text += f" tied_max={self.tied_max}"
        if self.mask_value != "-inf" and self.masked_lanes().any():
            text += f" mask={self.mask_value}"
        if self.masked_rows:
            text += " masked_rows"
        return text

    def mask_fill(self) -> float:
        """The value of a masked logit (:attr:`mask_value`) in the case's dtype."""
        if self.mask_value == "finfo-min":
            return float(ml_dtypes.finfo(cast(np.zeros(1), self.dtype).dtype).min)
        return -np.inf if self.mask_value == "-inf" else float(self.mask_value)

    def materialize(self) -> dict[str, np.ndarray]:
        """x [*leading, n] in the case's dtype (the reference sees the rounded values):
        its masked lanes :meth:`mask_fill`, and in each row ``tied_max`` unmasked logits set
        to the row's (rounded) maximum."""
        z = self.rng().standard_normal((*self.leading, self.n))
        x = cast(self.offset + self.scale * z, self.dtype)
        x[..., self.masked_lanes()] = self.mask_fill()
        if self.tied_max:
            rows = x.reshape(self.rows, self.n)  # a view: x is contiguous
            kept = np.array(self.kept_lanes())
            rng = self.rng(_TIE_STREAM)
            for row in rows:  # the max and tied_max - 1 others, exactly tied_max in all
                top = kept[np.argmax(row[kept])]
                others = kept[kept != top]
                row[rng.choice(others, size=self.tied_max - 1, replace=False)] = row[top]
        if self.masked_rows:  # every other row (the only one, of one) wholly the sentinel
            x.reshape(self.rows, self.n)[(1 if self.rows > 1 else 0)::2] = self.mask_fill()
        return {"x": x}


def masked_prefixes(n: int) -> st.SearchStrategy[int]:
    """How many leading logits of each row are -inf: none half the time; else a whole
    leading 128-lane block (rows longer than a block), all but the last logit, or any
    length. Shrinks towards none."""
    if n == 1:
        return st.just(0)
    some = [st.integers(1, n - 1), st.just(n - 1), *([st.just(LANES)] if n > LANES else [])]
    return st.one_of(st.just(0), st.just(0), *some)


@st.composite
def row_masks(draw: st.DrawFn, n: int) -> tuple[int, int, tuple[int, int]]:
    """(prefix, suffix, block) masks of a row of ``n``: a prefix as
    :func:`masked_prefixes` draws it; then, in the finite part left, half the time a
    masked suffix (one logit, a whole trailing 128-lane block, all but one logit, or any
    length) and a third of the time a masked block inside it (starting anywhere; a whole
    128-lane block where it fits). Each row keeps a finite logit. Shrinks towards none."""
    prefix = draw(masked_prefixes(n))
    left = n - prefix
    suffix = 0
    if left > 1:
        some = [st.just(1), st.integers(1, left - 1), st.just(left - 1),
                *([st.just(LANES)] if left > LANES else [])]
        suffix = draw(st.one_of(st.just(0), st.just(0), st.just(0), st.just(0), *some))
    left -= suffix
    block = (0, 0)
    if left > 2 and draw(st.integers(0, 2)) == 2:  # one finite logit each side of it
        length = draw(st.one_of(st.integers(1, left - 2),
                                *([st.just(LANES)] if left - 2 >= LANES else [])))
        block = (prefix + 1 + draw(st.integers(0, left - 2 - length)), length)
    return prefix, suffix, block


def tied_maxima(kept: int) -> st.SearchStrategy[int]:
    """How many unmasked logits of a row equal its maximum: none four times in seven;
    else two, several, or all ``kept`` of them (a uniform row). Shrinks towards none."""
    if kept < 2:
        return st.just(0)
    return st.one_of(st.just(0), st.just(0), st.just(0), st.just(0), st.just(2),
                     st.integers(2, kept), st.just(kept))


@st.composite
def row_values(draw: st.DrawFn, case: SoftmaxCase) -> SoftmaxCase:
    """``case`` with its masks (:func:`row_masks`) and tied maxima (:func:`tied_maxima`)
    drawn."""
    prefix, suffix, block = draw(row_masks(case.n))
    masked = dataclasses.replace(case, masked_prefix=prefix, masked_suffix=suffix,
                                 masked_block=block)
    if masked.masked_lanes().any():  # -inf half the time, else a finite sentinel
        finite = [v for v in MASK_VALUES[1:] if not (v == "-1e9" and case.dtype == "float16")]
        masked = dataclasses.replace(masked, mask_value=draw(st.one_of(
            st.just("-inf"), st.sampled_from(finite))))
        if masked.mask_value != "-inf":  # round 8: a padded query's row, all sentinel
            masked = dataclasses.replace(masked, masked_rows=draw(st.booleans()))
    return dataclasses.replace(masked, tied_max=draw(tied_maxima(len(masked.kept_lanes()))))


@st.composite
def softmax_cases(draw: st.DrawFn, *, dtypes: tuple[str, ...] = DTYPES,
                  sizes: Mapping[str, Span] | None = None) -> SoftmaxCase:
    """Valid :class:`SoftmaxCase` s: all three dtypes, row lengths at and around powers of
    two, 0-5 leading axes, logits O(1), spread by up to 1e4 or offset by +-1000, masked
    prefixes, suffixes and blocks (:func:`row_masks`; -inf or a finite sentinel:
    :data:`MASK_VALUES`), and rows whose maximum is
    tied (:func:`tied_maxima`). Shrinks towards float32, n=100, 2x3 rows, O(1) logits,
    nothing masked or tied.

    ``sizes``: the large sizes (the ``large-sizes`` property): the row length drawn
    log-uniformly from ``sizes["n"]`` and one leading axis per ``sizes["leading[i]"]``
    (:func:`~kernel_harness.records.claims.log_sizes`: the simplest draw is each span's
    top), everything else as above. Without it the draws are the ordinary ones, unchanged."""
    dtype = draw(st.sampled_from(dtypes))
    offset, scale = draw(logits(dtype))
    seed = draw(st.integers(0, 2**31 - 1))
    if sizes is None:
        leading, n = draw(st.sampled_from(LEADING)), draw(st.sampled_from(ROW_LENGTHS))
    else:
        n = draw(log_sizes(sizes["n"]))
        leading = tuple(draw(log_sizes(sizes[f"leading[{i}]"]))
                        for i in range(len(sizes) - 1))
    return draw(row_values(SoftmaxCase(dtype=dtype, seed=seed, leading=leading, n=n,
                                       offset=offset, scale=scale)))


def softmax_data_draws(case: SoftmaxCase) -> st.SearchStrategy[SoftmaxCase]:
    """Cases of ``case``'s compiled program (``Family.data_draws``): another data seed,
    logit offset/scale, masks and tied maxima, drawn as :func:`softmax_cases` draws them."""
    plain = dataclasses.replace(case, masked_prefix=0, masked_suffix=0, masked_block=(0, 0),
                                tied_max=0, mask_value="-inf", masked_rows=False)
    return st.builds(
        lambda seed, logits: dataclasses.replace(plain, seed=seed, offset=logits[0],
                                                 scale=logits[1]),
        st.integers(0, 2**31 - 1), logits(case.dtype)).flatmap(row_values)


def aimed_cases(constant: float, without: frozenset[str]) -> list[SoftmaxCase]:
    """Rows whose logits sit a hair past ``constant`` on either side (an offset of 1.01
    and 0.99 times it, spread by four of the dtype's ulps there, or 1: probabilities that
    are neither one-hot nor all equal), in float32, and in float16 and bfloat16 where it
    fits: what ``checks/aimed.py`` runs for an implementation's own constants
    (``Family.aimed``)."""
    out = []
    for dtype in ("float32", "float16", "bfloat16"):
        if dtype in without:
            continue
        for factor in (1.01, 0.99):
            offset = constant * factor
            scale = max(abs(offset) * 4 * float(ml_dtypes.finfo(
                cast(np.zeros(1), dtype).dtype).eps), 1.0)
            limit = 6e4 if dtype == "float16" else 3e38
            if abs(offset) + 6 * scale < limit:
                out.append(SoftmaxCase(dtype=dtype, seed=0, leading=(2,), n=100,
                                       offset=offset, scale=scale))
    return out
