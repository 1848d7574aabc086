"""Cases of the Pallas GPU (Triton) ``layer_norm`` / ``rms_norm`` kernels and the strategy.

A case names the op, the shape (the kernels take x as [a, b, n] exactly: their forward is
vmapped twice over the leading axes), eps, and how the rows are drawn: ``spread`` (their
standard deviation), ``offset`` (their mean, in units of ``spread``) and ``constant_rows``
(rows whose elements are all equal: variance exactly 0) and ``affine`` (random weight and
bias, or the identity: weight all ones, bias all zeros, as models initialise their norms);
the arrays come from the seed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import ClassVar

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import DTYPES, Case, cast
from kernel_harness.ops.values import magnitudes
from kernel_harness.records.claims import Span, log_sizes

OPS: tuple[str, ...] = ("layer_norm", "rms_norm")

#: Row lengths around the kernels' block boundaries: the forward and dx kernels loop over
#: blocks of clamp(next_pow2(n), 128, 4096) columns (so n <= 128, n not a power of two, and
#: n > 4096 with a partial second block); dweight/dbias take 16-column blocks (32 x 128
#: above n = 10240) over 16-row blocks.
ROW_LENGTHS: tuple[int, ...] = (100, 1, 7, 16, 127, 128, 129, 200, 256, 257, 1000, 4095,
                                4096, 4097, 5000)
#: Leading shapes (a, b): rows a*b of 1, below one 16-row block, exactly one, several
#: with a partial last block, and past 64 rows (99: a grid that covers one 64-row tile
#: only passed every 1-40-row draw: issue 55's round 3, ``many_rows_grid_bug_norm``).
LEADING: tuple[tuple[int, int], ...] = ((2, 3), (1, 1), (1, 16), (1, 17), (3, 11), (5, 8),
                                        (3, 33))
#: Leading shapes drawn anywhere (one draw in four, :func:`_leading`): a and b each from 1
#: to 64, log-uniform, at most this many rows a*b (round 14 of the adversarial set swapped
#: the leading axes only when the first passed 8, where the menu stopped at 5).
ANYWHERE_ROWS = 256
#: 1e-12: BERT's (a kernel that clamps eps, say to 1e-6, is wrong there on rows of small
#: variance: issue 55's round 3, `eps_floor_norm`); 100: an eps past every row's variance
#: (the output shrinks towards 0; round 11 passed a kernel capping eps at 8, where draws
#: stopped at 0.1).
EPS_VALUES: tuple[float, ...] = (1e-5, 1e-6, 1e-3, 1e-1, 1e2, 1e-12)
#: float16 holds 1/sqrt(eps) only for eps >= 2.4e-10 (its max is 65504): a row of variance 0
#: at eps 1e-12 has a dx of ~1e6 no float16 kernel can return, and jax's Pallas layer_norm
#: (rstd kept in x's dtype) returns NaN there and in dweight's every column (seen at
#: --max-examples 8, 2026-12-06; not a finding yet). float16 draws the others.
FLOAT16_EPS: tuple[float, ...] = EPS_VALUES[:5]
#: Row standard deviations: ordinary, near sqrt(eps) (eps matters), large magnitude.
SPREADS: tuple[float, ...] = (1.0, 1e-2, 30.0)
#: Beside the menus, eps and spreads anywhere in these powers of ten (float16's second:
#: its 1/sqrt(eps) and its squares stay finite): round 12 of the adversarial set scaled
#: rows of variance past 1e6, mean squares past 1e12, and eps in [1e-10, 5e-8].
ANYWHERE_EPS: tuple[tuple[float, float], tuple[float, float]] = ((-12.0, 2.0), (-9.6, 2.0))
ANYWHERE_SPREAD: tuple[tuple[float, float], tuple[float, float]] = ((-3.0, 8.0),
                                                                     (-2.0, 1.5))


#: sqrt(eps) at most this many spreads: past it the rows are all eps, xhat ~1/CONDITIONING
#: and dweight a cancelling sum the float32 kernel cannot hold to its tolerance (pristine
#: layer_norm, spread 0.01, n 4095, constant rows: dweight errs 1.9e-4 of its largest at
#: eps 79, 1000 spreads, against 1.5e-4; 5.4e-5 at eps 10, 316 spreads; 2026-12-07).
CONDITIONING = 316.0


def _log_int(lo: int, hi: int) -> st.SearchStrategy[int]:
    """An integer from ``lo`` to ``hi``, every factor of 2 equally likely (shrinks to lo)."""
    return st.floats(math.log2(lo), math.log2(hi)).map(
        lambda e: max(lo, min(hi, round(2.0 ** e))))


def _leading() -> st.SearchStrategy[tuple[int, int]]:
    """One of :data:`LEADING` three times in four, else (a, b) anywhere up to
    :data:`ANYWHERE_ROWS` rows."""
    anywhere = _log_int(1, 64).flatmap(
        lambda a: _log_int(1, max(1, min(64, ANYWHERE_ROWS // a))).map(lambda b: (a, b)))
    return st.integers(0, 3).flatmap(lambda k: st.sampled_from(LEADING) if k < 3 else anywhere)


def _menu_or_anywhere(menu: tuple[float, ...], anywhere: tuple[float, float]
                      ) -> st.SearchStrategy[float]:
    """One of ``menu`` three times in four (shrinking towards its first), else a power of
    ten anywhere in ``anywhere`` (:func:`~kernel_harness.ops.values.magnitudes`)."""
    return st.integers(0, 3).flatmap(
        lambda k: st.sampled_from(menu) if k < 3 else magnitudes(*anywhere))


#: Which rows are constant (every element equal: variance exactly 0): none; every odd row
#: (row 1, 3, ...: beside ordinary rows whenever there are two); every even row all zeros
#: (padding tokens: rms_norm's mean(x^2) is 0 too; a lone row is then all zeros). The first
#: is the one the strategy shrinks towards.
CONSTANT_ROWS: tuple[str, ...] = ("none", "some", "zero")
#: layer_norm's constant rows sit at most this many sqrt(eps) from 0. With the variance 0
#: their xhat is (c - mean) / sqrt(eps), and the kernel's float32 mean of c is a few ulps
#: off: xhat errs by ~|c| / sqrt(eps) x 4 ulps where the reference's is exactly 0, which
#: dweight (a sum of do * xhat, its scale the other rows' terms) cannot absorb when those
#: rows are eps-dominated (xhat ~0.03). Pristine worst usage over 24 float32 cases beside
#: rows 300 spreads out (interpret, 2026-12-05): dweight 0.14 at 3, 1.4 at 40 (fails), and
#: at 300 dweight 10, out 2.8. rms_norm's constant rows are well conditioned at any size
#: (xhat = c / sqrt(c^2 + eps) ~ sign(c)): they sit at the rows' drawn mean.
CONSTANT_OFFSET = 3.0
#: The affine parameters: random (weight ~1 + N(0, 0.5), bias ~N(0, 0.5)), or the identity
#: (weight all ones, bias all zeros: how models initialise a norm, and what a fresh
#: checkpoint's norms hold), or pruned (random, every fourth channel's weight exactly 0: a
#: dead or pruned channel, whose dweight is still sum(do * xhat); round 8 of the adversarial
#: set froze exactly-zero weights). The first is the one the strategy shrinks towards.
AFFINES: tuple[str, ...] = ("random", "identity", "pruned")


@dataclasses.dataclass(frozen=True, kw_only=True)
class NormCase(Case):
    """One ``layer_norm`` or ``rms_norm`` call and its vjp.

    Attributes:
      op: ``layer_norm`` or ``rms_norm``.
      leading: (a, b); x is [a, b, n], weight and bias [n]; rows = a * b.
      n: row length (the normalized axis).
      eps: the kernel's ``eps`` (a static argument).
      spread: standard deviation of each row's data.
      offset: each row's mean in units of ``spread`` (plus a small per-row jitter); a large
        offset makes layer_norm's variance a cancelling difference.
      constant_rows: one of :data:`CONSTANT_ROWS`: which rows of x hold one value
        repeated: 0 for ``zero``; else the row's mean, ``offset`` (plus the jitter) in
        units of the row's own scale: ``spread`` for rms_norm, sqrt(eps) (the constant
        row's sqrt(var + eps)) for layer_norm, there at most :data:`CONSTANT_OFFSET`.
      affine: one of :data:`AFFINES`: ``identity`` makes weight all ones and bias all zeros,
        ``pruned`` every fourth channel's weight 0.
      rectified: x is a ReLU's output (negative values 0): a row about half exact zeros,
        runs of equal values anywhere in it, its leading elements included.
    """

    op: str
    leading: tuple[int, int]
    n: int
    eps: float = 1e-5
    spread: float = 1.0
    offset: float = 0.0
    constant_rows: str = "none"
    affine: str = "random"
    rectified: bool = False

    #: Data only: spread, offset, the constant rows, the affine parameters and the ReLU shape
    #: the arrays, not the program.
    DYNAMIC_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"seed", "spread", "offset", "constant_rows", "affine", "rectified"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.op not in OPS:
            raise ValueError(f"op must be one of {OPS}, got {self.op!r}")
        if len(self.leading) != 2 or min(self.leading) < 1:
            raise ValueError(f"leading must be two positive sizes (x is [a, b, n]), got "
                             f"{self.leading!r}")
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if not self.eps > 0:
            raise ValueError(f"eps must be > 0, got {self.eps}")
        if not self.spread > 0:
            raise ValueError(f"spread must be > 0, got {self.spread}")
        if self.constant_rows not in CONSTANT_ROWS:
            raise ValueError(f"constant_rows must be one of {CONSTANT_ROWS}, got "
                             f"{self.constant_rows!r}")
        if self.affine not in AFFINES:
            raise ValueError(f"affine must be one of {AFFINES}, got {self.affine!r}")

    @property
    def rows(self) -> int:
        return self.leading[0] * self.leading[1]

    @property
    def block_size(self) -> int:
        """The forward/dx kernels' column block (their heuristic, restated)."""
        return min(max(1 << (self.n - 1).bit_length(), 128), 4096)

    def constant_mask(self) -> np.ndarray:
        """bool [a, b]: the rows of x that are constant (all False for ``none``)."""
        flat = np.arange(self.rows)
        if self.constant_rows == "none":
            return np.zeros(self.leading, bool)
        return (flat % 2 == (1 if self.constant_rows == "some" else 0)).reshape(self.leading)

    def shape_summary(self) -> str:
        text = f"{self.op} x=({self.leading[0]},{self.leading[1]},{self.n}) eps={self.eps:g}"
        if self.constant_rows != "none":
            text += f" constant_rows={self.constant_rows}"
        if self.affine != "random":
            text += f" affine={self.affine}"
        return text + (" rectified" if self.rectified else "")

    def materialize(self) -> dict[str, np.ndarray]:
        """x (rows of mean ~offset*spread, std ~spread; the constant rows their mean
        repeated, or 0), weight ~1 + N(0, 0.5) and bias ~N(0, 0.5) (or ones and zeros:
        ``affine="identity"``), the cotangent ``do``; all in the case's dtype (the reference
        sees the rounded values)."""
        rng = self.rng()
        a, b = self.leading
        jitter = rng.standard_normal((a, b, 1)) * 0.1
        x = self.spread * (self.offset + jitter + rng.standard_normal((a, b, self.n)))
        if self.constant_rows != "none":  # no extra draws: other cases keep their arrays
            if self.constant_rows == "zero":
                value = 0.0
            elif self.op == "rms_norm":
                value = self.spread * (self.offset + jitter)
            else:
                offset = np.clip(self.offset, -CONSTANT_OFFSET, CONSTANT_OFFSET)
                value = np.sqrt(self.eps) * (offset + jitter)
            x = np.where(self.constant_mask()[..., None], value, x)
        if self.rectified:  # no extra draws: other cases keep their arrays
            x = np.maximum(x, 0.0)
        weight = 1.0 + 0.5 * rng.standard_normal(self.n)
        bias = 0.5 * rng.standard_normal(self.n)
        do = rng.standard_normal((a, b, self.n))
        if self.affine == "identity":  # drawn all the same: do stays the random case's
            weight, bias = np.ones(self.n), np.zeros(self.n)
        elif self.affine == "pruned":
            weight[::4] = 0.0
        return {"x": cast(x, self.dtype), "weight": cast(weight, self.dtype),
                "bias": cast(bias, self.dtype), "do": cast(do, self.dtype)}


#: Offsets (in spreads; a layer_norm constant row's in sqrt(eps)) drawn per dtype. float32:
#: up to 300 standard deviations, where a one-pass variance (E[x^2] - mean^2) loses ~2e-3
#: of its value. Low precision: the kernel's backward reads mean and rstd rounded to the input
#: dtype (its residuals' dtype), so an offset costs dx/dweight ~offset * 2^-9 (bf16)
#: relative; drawn up to 2 (contract).
OFFSETS: dict[str, tuple[float, ...]] = {
    "float32": (0.0, 3.0, 300.0, -40.0),
    "bfloat16": (0.0, 2.0, -1.0),
    "float16": (0.0, 2.0, -1.0),
}


#: Features an implementation may declare it lacks (``--without``), and what the strategy
#: then stops drawing.
OPTIONAL: dict[str, str] = {
    "rms-norm": "no rms_norm cases (an implementation of layer_norm only)",
    "float16": "no float16 cases",
    "rows-over-4096": "row lengths n <= 4096 (one column block)",
    "unaligned-n": "row lengths n multiples of 128 only",
}


def uses(case: NormCase) -> frozenset[str]:
    """The :data:`OPTIONAL` features ``case`` uses."""
    used = set()
    if case.op == "rms_norm":
        used.add("rms-norm")
    if case.dtype == "float16":
        used.add("float16")
    if case.n > 4096:
        used.add("rows-over-4096")
    if case.n % 128:
        used.add("unaligned-n")
    return frozenset(used)


def _lengths(without: frozenset[str]) -> tuple[int, ...]:
    lengths = ROW_LENGTHS
    if "rows-over-4096" in without:
        lengths = tuple(n for n in lengths if n <= 4096)
    if "unaligned-n" in without:
        lengths = tuple(n for n in lengths if n % 128 == 0)
    return lengths


@st.composite
def norm_cases(draw: st.DrawFn, *, dtypes: tuple[str, ...] = DTYPES,
               ops: tuple[str, ...] = OPS, without: frozenset[str] = frozenset(),
               sizes: Mapping[str, Span] | None = None) -> NormCase:
    """Valid :class:`NormCase` s: both ops, all three dtypes, row lengths around every
    block boundary of the kernels, 1-40 or 99 rows (partial 16-row blocks), eps from 1e-12 to
    0.1, spreads near sqrt(eps) and large ones, mean offsets up to 300 spreads (float32),
    in half the cases constant rows (variance 0: odd rows constant or even rows zero,
    beside ordinary ones), in a quarter each the identity affine (weight ones, bias zeros)
    and the pruned one (every fourth weight 0), in
    half a ReLU's output (half the elements exact zeros). Shrinks towards float32
    layer_norm, n=100, 2x3 rows, no constant row, random affine, not rectified.
    ``without``: :data:`OPTIONAL` features not drawn. ``sizes``: the large sizes (the
    ``large-sizes`` property): x's axes ``a``, ``b`` and ``n`` drawn log-uniformly from
    their spans (:func:`~kernel_harness.records.claims.log_sizes`: the simplest draw is each
    span's top; a span past 4096 columns only without ``rows-over-4096`` left out, the
    caller's to keep), everything else as above; without it the draws are unchanged."""
    unknown = set(without) - set(OPTIONAL)
    if unknown:
        raise ValueError(f"norm_cases: unknown features {sorted(unknown)}")
    if "rms-norm" in without:
        ops = tuple(o for o in ops if o != "rms_norm")
    if "float16" in without:
        dtypes = tuple(d for d in dtypes if d != "float16")
    dtype = draw(st.sampled_from(dtypes))
    seed = draw(st.integers(0, 2**31 - 1))
    op = draw(st.sampled_from(ops))
    leading = (draw(_leading()) if sizes is None
               else (draw(log_sizes(sizes["a"])), draw(log_sizes(sizes["b"]))))
    n = (draw(st.sampled_from(_lengths(frozenset(without)))) if sizes is None
         else draw(log_sizes(sizes["n"])))
    eps = draw(_menu_or_anywhere(FLOAT16_EPS if dtype == "float16" else EPS_VALUES,
                                 ANYWHERE_EPS[dtype == "float16"]))
    spread = draw(_menu_or_anywhere(SPREADS, ANYWHERE_SPREAD[dtype == "float16"]))
    return NormCase(
        dtype=dtype,
        seed=seed,
        op=op,
        leading=leading,
        n=n,
        eps=min(eps, (CONDITIONING * spread) ** 2),
        spread=spread,
        offset=draw(st.sampled_from(OFFSETS[dtype])),
        constant_rows=draw(st.sampled_from(CONSTANT_ROWS[:1] * 2 + CONSTANT_ROWS[1:])),
        affine=draw(st.sampled_from(AFFINES[:1] * 2 + AFFINES[1:])),
        # Drawn last: the draws before it replay as they did before it was drawn.
        rectified=draw(st.booleans()),
    )


def aimed_cases(constant: float, without: frozenset[str]) -> list[NormCase]:
    """float32 rows a hair past ``constant`` (its magnitude): a spread of 1.01 times it and
    of 1.01 times its square root (a variance or a mean square past it), and an eps of 1.01
    times it where an eps may be, for each op drawn: what ``checks/aimed.py`` runs for an
    implementation's own constants (``Family.aimed``)."""
    c = abs(constant)
    ops = ("layer_norm",) if "rms-norm" in without else ("layer_norm", "rms_norm")
    out = []
    for op in ops:
        out += [NormCase(dtype="float32", seed=0, op=op, leading=(2, 3), n=100, spread=s)
                for s in (c * 1.01, math.sqrt(c) * 1.01) if 1e-6 <= s <= 1e15]
        if 1e-12 <= c * 1.01 <= 1e2:
            out.append(NormCase(dtype="float32", seed=0, op=op, leading=(2, 3), n=100,
                                eps=c * 1.01))
    return out
