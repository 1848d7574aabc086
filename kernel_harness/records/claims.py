"""The largest sizes a family's kernel is meant for (issue 55, item 5), checked without
paying for them: the ``claimed-sizes`` property traces the implementation at each claimed
size on abstract inputs (nothing is allocated or run), and on a ladder of sizes between a
small size and each claimed one, and compares what it would run there with what it runs
at the small size (:mod:`kernel_harness.checks.claimed_sizes`).

Softmax rows are vocabularies (32k-256k), attention runs 8k-128k tokens: an implementation
that runs its kernel only for the sizes a test draws (a "ghost branch": plain XLA, a
constant, a fallback or a concatenation past some size, or between the drawn sizes and the
claimed ones) passes every drawn case.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
from hypothesis import strategies as st

#: Abstract inputs by name (``jax.ShapeDtypeStruct``: shape and dtype, no data).
Abstract = Mapping[str, Any]
#: ``extent(small, claimed) -> int``: a rung's extent for an axis that is ``small`` at the
#: small size and ``claimed`` at the claimed one (one rung: the same pair, the same extent).
Extent = Callable[[int, int], int]
#: ``rung(small, claimed, extent) -> arrays``: the abstract inputs of one rung between the
#: small size and one claimed size (:func:`interpolated` unless a Claim declares its own).
RungMaker = Callable[[Abstract, Abstract, Extent], Abstract]
#: ``jitter(rung, (small, claimed)) -> u`` in [0, 1): where in its stretch of the ladder a
#: rung falls on that axis (drawn by Hypothesis in the property).
Jitter = Callable[[int, tuple[int, int]], float]

#: The ladder's step: one rung per factor of this between the small and the claimed extent
#: of the axis that grows most.
FACTOR = 2.0


def rung_extent(small: int, claimed: int, fraction: float) -> int:
    """The extent ``fraction`` (0..1) of the way from ``small`` to ``claimed``, geometrically,
    rounded to a multiple of ``gcd(small, claimed)`` (the divisibility both sizes share, kept
    for the kernel) and kept between the two. An empty axis on either side, or equal
    extents, give ``claimed``."""
    if small == claimed or min(small, claimed) <= 0:
        return claimed
    step = math.gcd(small, claimed)
    value = small * (claimed / small) ** min(max(fraction, 0.0), 1.0)
    low, high = sorted((small, claimed))
    return min(max(round(value / step) * step, low), high)


def interpolated(small: Abstract, claimed: Abstract, extent: Extent) -> Abstract:
    """The generic rung: every array of the claimed size, in its dtype, each axis mapped
    through ``extent`` from its (small, claimed) pair of extents. Axes align from the right
    (a small size of another rank: ``x (2, 3, 100)`` against ``x (8, 262144)`` pairs 3 with 8
    and 100 with 262144). An axis with no small counterpart (an array or a leading axis the
    small size lacks) takes the pair of an axis that has one with the same claimed extent
    (``segment_ids (B, T)`` the pairs of ``q (B, T, H, D)``), else ``(1, claimed)``."""
    known: dict[int, int] = {}
    for name, a in claimed.items():
        if name in small:
            for s, c in zip(reversed(small[name].shape), reversed(a.shape), strict=False):
                known.setdefault(c, s)

    def axis(name: str, i: int, c: int) -> int:
        shape = small[name].shape if name in small else ()
        offset = len(shape) - len(claimed[name].shape)
        s = shape[i + offset] if 0 <= i + offset < len(shape) else known.get(c, 1)
        return extent(s, c)

    return {name: jax.ShapeDtypeStruct(
                tuple(axis(name, i, c) for i, c in enumerate(a.shape)), a.dtype)
            for name, a in claimed.items()}


#: A :class:`Span`'s draw: an integer in [0, LOG_STEPS], 0 the span's top (the simplest
#: choice, so a property's first example is at the capped claimed size: Hypothesis tries the
#: simplest example first), LOG_STEPS its bottom, geometric between.
LOG_STEPS = 1000


@dataclasses.dataclass(frozen=True)
class Span:
    """The extents of one axis a large example draws: ``low`` to ``high``, multiples of
    ``multiple``, log-uniformly (:func:`log_sizes`). ``low`` is just past the extents the
    op's ordinary strategy draws, ``high`` the claimed extent capped by a profile's budget
    (:class:`Tier`)."""

    low: int
    high: int
    multiple: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.low <= self.high or self.multiple < 1 \
                or self.low % self.multiple or self.high % self.multiple:
            raise ValueError(f"a span needs 1 <= low <= high, both multiples of {self.multiple}"
                             f", got {self}")

    def __str__(self) -> str:
        step = f" (multiples of {self.multiple})" if self.multiple > 1 else ""
        return f"{self.low}..{self.high}{step}"


#: Where a drawn extent may be moved to (:func:`log_sizes`): unmoved, or this many multiples
#: from the nearest power of two: the edges of a kernel's tiles and of its padding to a
#: power of two (round 6 of the adversarial set passed a softmax that dropped the last
#: logit of rows 1-4 short of a power of two past 2048, none of them drawn).
POW2_EDGES: tuple[int | None, ...] = (None, -1, 1, -2, -3, -4)


def log_sizes(span: Span) -> st.SearchStrategy[int]:
    """Extents of ``span`` drawn log-uniformly (every factor of 2 between its ends equally
    likely), rounded down to its multiple, then, unless the first of :data:`POW2_EDGES` is
    drawn, moved to that many multiples from the nearest power of two (kept in the span);
    the simplest draw (and the one shrinking moves towards) is the top, ``span.high``, as
    it is: the largest size the budget affords."""
    def extent(u: int, edge: int | None) -> int:
        value = span.high * (span.low / span.high) ** (u / LOG_STEPS)
        if edge is not None:
            value = (1 << round(math.log2(max(value, 1)))) + edge * span.multiple
        return min(max(int(value) // span.multiple * span.multiple, span.low), span.high)

    return st.builds(extent, st.integers(0, LOG_STEPS), st.sampled_from(POW2_EDGES))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Tier:
    """One budget of real examples at large sizes (a profile picks one by name:
    ``kernel_harness.run.profiles.LARGE_SIZES``).

    Attributes:
      spans: per claimed size (in :attr:`LargeSizes` order), the spans its axes are drawn
        from, by axis name (what the family's :attr:`LargeSizes.cases` hands the op's
        strategy): the claimed extents, capped.
      why: what is capped and why (printed by ``describe`` and by the property).
      examples: where set, the examples this tier runs instead of the profile's
        (``kernel_harness.run.profiles.LARGE_SIZES``): a family whose cases at the caps cost
        most runs fewer (``--max-examples`` still overrides it).
    """

    spans: tuple[Mapping[str, Span], ...]
    why: str
    examples: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class LargeSizes:
    """Real examples up to a family's claimed sizes, RUN and compared with the reference
    like ``matches-reference``'s (the ``large-sizes`` property,
    :mod:`kernel_harness.checks.large_sizes`): each example draws one case per claimed
    size, every axis log-uniformly between just past the drawn sizes and the claimed
    extent capped by the profile's tier, its first example at the caps.

    Attributes:
      names: one label per claimed size (``"vocabulary, bfloat16"``), in order.
      cases: ``cases(index, spans, without) -> strategy``: the op's strategy for claimed
        size ``index`` with its axes drawn from ``spans`` (the family only wires the
        op's size-range parameters: no family copies a strategy); ``without``: what the
        check leaves out (a claimed size that needs it: :attr:`uses`).
      uses: ``uses(index) -> features``: the optional features (and dtypes) claimed size
        ``index`` needs; one the check leaves out is not drawn.
      tiers: the budgets by name (``ci``, ``nightly``).
    """

    names: tuple[str, ...]
    cases: Callable[[int, Mapping[str, Span], frozenset[str]], st.SearchStrategy[Any]]
    uses: Callable[[int], frozenset[str]] = lambda index: frozenset()
    tiers: Mapping[str, Tier]

    def __post_init__(self) -> None:
        for name, tier in self.tiers.items():
            if len(tier.spans) != len(self.names):
                raise ValueError(f"tier {name}: {len(tier.spans)} span sets for "
                                 f"{len(self.names)} claimed sizes")
            if not tier.why.strip():
                raise ValueError(f"tier {name}: say what is capped and why")

    def kept(self, without: frozenset[str]) -> list[int]:
        """The claimed sizes (indices) that need nothing ``without`` leaves out."""
        return [i for i in range(len(self.names)) if not self.uses(i) & without]

    def tier(self, name: str) -> Tier:
        """The tier ``name``; an unknown one falls back to the cheapest (``ci``)."""
        return self.tiers.get(name) or self.tiers["ci"]

    def strategy(self, tier: str, without: frozenset[str]) -> st.SearchStrategy[tuple]:
        """One case per claimed size kept, in order: what one example judges."""
        spans = self.tier(tier).spans
        return st.tuples(*(self.cases(i, spans[i], without) for i in self.kept(without)))

    def describe(self) -> list[str]:
        """Lines for ``describe``: per tier, what each claimed size draws, and why capped."""
        lines = ["large sizes (real examples, run and compared with the reference; one "
                 "case per claimed size an example, the first at the caps):"]
        for name, tier in self.tiers.items():
            count = "" if tier.examples is None else f" ({tier.examples} example(s))"
            lines.append(f"  {name}{count}: {tier.why}")
            for label, spans in zip(self.names, tier.spans, strict=True):
                axes = ", ".join(f"{axis} {span}" for axis, span in spans.items())
                lines.append(f"    {label}: {axes}")
        return lines


def _key(arrays: Abstract) -> tuple[Any, ...]:
    return tuple((n, tuple(a.shape), str(a.dtype)) for n, a in arrays.items())


#: The most input elements (all arrays together) the wrapper comparison holds at one size.
STAND_IN_CAP = 1 << 26


@dataclasses.dataclass(frozen=True, kw_only=True)
class Claim:
    """Where a kernel claims to work, and how to call it on abstract inputs.

    The claim covers every size up to each claimed one: ``claimed-sizes`` traces the
    claimed sizes and a ladder of rungs between the small size and each (:meth:`ladder`),
    and a rung whose trace raises is a FAIL, not a skip.

    Attributes:
      reason: why these sizes (what the kernel is for), printed by ``describe``.
      sizes: the claimed sizes, as abstract inputs (the largest the kernel is meant for;
        a few, not a sweep: tracing one costs about what tracing a small one does).
      small: a small size of the same call, the baseline of the comparison and the foot of
        every ladder.
      call: ``call(impl, arrays) -> outputs``: the implementation called on named arrays as
        the family's adapter calls it (its ``interpret=`` from
        ``kernel_harness.current_backend()``); a rung's arrays too, so whatever it derives
        from the arrays (gpu-mha's causal flag) must survive :attr:`rung`.
      uses: ``uses(arrays) -> features``: the optional features (``Family.optional``) a
        claimed size or rung uses; one using a feature the check leaves out (``--without``)
        is not traced, and neither is one of a dtype left out.
      rung: the rung maker (:data:`RungMaker`): :func:`interpolated` unless the family's
        arrays are related in a way that interpolating each axis by its pair of extents
        breaks; a maker of its own should still send every extent through ``extent``.
      no_ladder: non-empty: the family opts out of the ladder, and this says why (printed
        by ``describe``); only the claimed sizes are traced then.
      large: real examples up to the claimed sizes (:class:`LargeSizes`), run by the
        ``large-sizes`` property; None: only traced (``large-sizes`` is a SKIP).
      integers: ``integers(name, abstract, arrays, rng) -> array``: valid values for an
        integer input (group sizes, segment ids, lengths) at any size, for the wrapper
        comparison with kernels stood in for (:mod:`kernel_harness.checks.wrapper_standin`);
        None: zeros.
      stand_in_sizes: sizes under the claimed ones where that comparison also runs (it
        holds its inputs: a size past :data:`STAND_IN_CAP` elements is not compared; a
        family without a ladder names a few here).
    """

    reason: str
    sizes: Callable[[], Sequence[Abstract]]
    small: Callable[[], Abstract]
    call: Callable[[Callable[..., Any], Mapping[str, Any]], Any]
    uses: Callable[[Abstract], frozenset[str]] = lambda arrays: frozenset()
    rung: RungMaker = interpolated
    no_ladder: str = ""
    large: LargeSizes | None = None
    integers: Callable[..., Any] | None = None
    stand_in_sizes: Callable[[], Sequence[Abstract]] = lambda: ()

    def __post_init__(self) -> None:
        if not self.reason.strip():
            raise ValueError("Claim.reason must say why these sizes")

    def _used(self, arrays: Abstract) -> frozenset[str]:
        return self.uses(arrays) | {str(a.dtype) for a in arrays.values()}

    def kept(self, without: frozenset[str],
             sizes: Callable[[], Sequence[Abstract]] | None = None) -> list[Abstract]:
        """The claimed sizes (or ``sizes``: :attr:`stand_in_sizes`) that use nothing
        ``without`` leaves out (features, dtypes)."""
        return [a for a in (sizes or self.sizes)() if not self._used(a) & without]

    def pairs(self, claimed: Abstract) -> list[tuple[int, int]]:
        """The distinct ``(small, claimed)`` extent pairs the rung maker maps on the way to
        ``claimed``, in the order it first asks (what the property jitters)."""
        seen: dict[tuple[int, int], None] = {}

        def record(s: int, c: int) -> int:
            seen.setdefault((s, c), None)
            return c

        self.rung(self.small(), claimed, record)
        return list(seen)

    def steps(self, claimed: Abstract) -> int:
        """How many rungs the ladder to ``claimed`` has: one per factor of :data:`FACTOR`
        on the axis that grows (or shrinks) most; 0 where the family opts out."""
        if self.no_ladder:
            return 0
        spans = [abs(math.log(c / s, FACTOR)) for s, c in self.pairs(claimed)
                 if s != c and min(s, c) > 0]
        return math.ceil(max(spans, default=0.0) - 1e-9)

    def ladder(self, claimed: Abstract, jitter: Jitter,
               without: frozenset[str] = frozenset()) -> list[Abstract]:
        """The rungs between the small size and ``claimed``, smallest first: rung ``r`` of
        ``n`` (:meth:`steps`) puts each axis ``(r + jitter(r, pair)) / n`` of the way from
        its small extent to its claimed one, geometrically (:func:`rung_extent`), so every
        factor of :data:`FACTOR` holds a rung whatever the jitter. A rung equal to the small
        size, the claimed one or the rung below it is dropped, and so is one using what
        ``without`` leaves out."""
        n = self.steps(claimed)
        small = self.small()
        seen = {_key(small), _key(claimed)}
        rungs = []
        for r in range(n):
            def extent(s: int, c: int, r: int = r) -> int:
                return rung_extent(s, c, (r + jitter(r, (s, c))) / n)

            arrays = self.rung(small, claimed, extent)
            if _key(arrays) not in seen and not self._used(arrays) & without:
                seen.add(_key(arrays))
                rungs.append(arrays)
        return rungs

    def describe(self) -> list[str]:
        """Lines for ``kernel-harness describe``: each claimed size, the reason, and the
        ladder between (or why the family has none)."""
        lines = [f"claimed sizes (traced, not run; {self.reason}):"]
        for arrays in self.sizes():
            lines.append("  " + ", ".join(f"{name} {tuple(a.shape)} {a.dtype}"
                                          for name, a in arrays.items()))
        small = ", ".join(f"{name} {tuple(a.shape)}" for name, a in self.small().items())
        if self.no_ladder:
            lines.append(f"  no ladder between {small} and the claimed sizes: "
                         f"{self.no_ladder}")
        else:
            steps = ", ".join(str(self.steps(a)) for a in self.sizes())
            lines.append(f"  and a ladder from {small} to each (traced, not run): one rung "
                         f"per factor of {FACTOR:g}, jittered ({steps} rungs)")
        if self.large is not None:
            lines += self.large.describe()
        return lines
