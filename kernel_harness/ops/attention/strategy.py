"""The attention problem's one strategy: cases of a kernel's case type drawn from its
:class:`~.features.Features`, every option drawn so that it changes what some row sees.

Causal attention, unequal lengths and a mask are drawn 3 times in 4, every other option
half the time (an option the kernel does not take, or that ``--without`` names, never),
the logit scale from :func:`~kernel_harness.core.case.logit_scales_for`. Which options are
on comes first: Hypothesis varies early choices most. Shrinks towards float32, batch 1,
equal lengths, one head, no options. The kernel's own configuration (its case type's extra
fields) comes from its ``config`` strategy, drawn last. Segment layouts (per batch row) are
drawn by :func:`segment_layouts`, the op's one segment drawer.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from kernel_harness.core.case import logit_scales_for
from kernel_harness.ops.attention.features import ALIGNED_LENGTHS, FIELD_OF, OPTIONAL
from kernel_harness.ops.attention.mask_draws import weighted
from kernel_harness.ops.attention.problem import MASKING, AttentionProblem
from kernel_harness.ops.attention.segment_draws import segment_layouts
from kernel_harness.records.claims import Span, log_sizes

#: The draw order of the options (``differ``: q_len != kv_len), and how often each is on
#: (in 4).
_ORDER = (("causal", 3), ("differ", 3), ("bias", 2), ("mask", 3), ("scale", 2),
          ("window", 2), ("kv-lengths", 2), ("q-lengths", 2), ("segments", 3),
          ("kv-starts", 2))
#: Key positions are drawn on or next to multiples of this, often: where kernels' key
#: blocks (16 keys and more) begin and end.
_EDGE = 16
#: The draw flag of each narrowing feature.
_FLAG = {**{f: f for f in FIELD_OF}, "q-len-ne-kv-len": "differ"}

#: Features only a kernel's own strategy draws so far (splash's).
FAMILY_DRAWN = frozenset({"soft-cap", "sinks", "head-dim-v", "per-head-masks", "local-window",
                        "chunked-causal", "numpy-mask"})

Config = Callable[[AttentionProblem], st.SearchStrategy[dict[str, Any]]]


def explicit_scales(features: Any, head_dim: int) -> st.SearchStrategy[float]:
    """An explicit scale: a multiple of 1/sqrt(head_dim) from ``features.scales`` (or 1.0
    with ``unit_scale``), and, one draw in four where ``features.scale_span`` is set, a
    multiple anywhere in that span, log-uniform."""
    menu = st.sampled_from([m / math.sqrt(head_dim) for m in features.scales]
                           + ([1.0] if features.unit_scale else []))
    if features.scale_span is None:
        return menu
    lo, hi = (math.log2(m) for m in features.scale_span)
    anywhere = st.floats(lo, hi).map(lambda e: 2.0 ** e / math.sqrt(head_dim))
    return st.integers(0, 3).flatmap(lambda k: menu if k < 3 else anywhere)


def _mostly(draw: st.DrawFn, in_4: int) -> bool:
    """True about ``in_4`` times in 4; shrinks towards False."""
    return draw(st.integers(0, 3)) >= 4 - in_4


@st.composite
def _position(draw: st.DrawFn, length: int) -> int:
    """A key position in ``[0, length]``, often on or next to a block edge (:data:`_EDGE`).
    Shrinks towards 0."""
    near = sorted({e + d for e in range(0, length + 1, _EDGE) for d in (-1, 0, 1)
                   if 0 <= e + d <= length})
    return draw(st.one_of(st.sampled_from(near), st.integers(0, length)))


def _bound(draw: st.DrawFn, features: Any, batch: int, value: Callable[[int], int]
           ) -> tuple[int, ...] | int:
    """One key bound per batch row (``value(row)``) or, where the kernel takes it, one
    scalar for every row (half the time)."""
    if features.scalar_bounds and draw(st.booleans()):
        return value(0)
    return tuple(value(row) for row in range(batch))


def _end(draw: st.DrawFn, kv_len: int, starts: tuple[int, ...] | int | None, row: int) -> int:
    """A row's key end: another position, or (after a start) the start itself (no key) or
    the start plus one (one key), so rows without keys and one-key rows are drawn."""
    how = weighted(draw, (("any", 3), ("one key", 1), ("no key", 1)))
    if how == "any" or starts is None:
        return draw(_position(kv_len))
    start = starts if isinstance(starts, int) else starts[row]
    return min(kv_len, start + (how == "one key"))


def _short_lengths(draw: st.DrawFn, batch: int, length: int, *, lowest: int) -> tuple[int, ...]:
    """Per-batch lengths in ``[lowest, length]``, at least one shorter than ``length``."""
    first = draw(st.integers(lowest, length - 1))
    return (first, *(draw(st.integers(lowest, length)) for _ in range(batch - 1)))


def calibrated(case: AttentionProblem) -> bool:
    """Whether ``case`` draws large logits: its dtype is judged by the calibrated bound
    (``Features.calibrated``) and it uses no feature whose outputs keep a fixed bound
    (``Features.unit_logits_with``)."""
    f = case.FEATURES
    return case.dtype in f.calibrated and not (f.used(case) & f.unit_logits_with)


def check_without(case_type: type[AttentionProblem], without: frozenset[str]) -> None:
    """Raises for a ``--without`` name the kernel's features do not know."""
    unknown = set(without) - set(optional_features(case_type))
    if unknown:
        raise ValueError(f"unknown optional features {sorted(unknown)}; known: "
                         f"{sorted(optional_features(case_type))}")


def optional_features(case_type: type[AttentionProblem]) -> dict[str, str]:
    """``Family.optional``: the op's optional features this kernel takes, then those of
    its own configuration (``Features.config_optional``), described."""
    f = case_type.FEATURES
    return {**{name: why for name, why in OPTIONAL.items() if f.takes(name)},
            **f.config_optional}


def _options(draw: st.DrawFn, features: Any, without: frozenset[str]) -> dict[str, bool]:
    off = {_FLAG[f] for f in without if f in _FLAG}
    off |= {_FLAG[f] for f in _FLAG if not features.takes(f)}
    on: dict[str, bool] = {}
    for name, in_4 in _ORDER:
        blocked = any(name in g and any(on.get(o) for o in g) for g in features.exclusive)
        on[name] = name not in off and not blocked and _mostly(draw, in_4)
    return on


def problems(case_type: type[AttentionProblem], *, config: Config | None = None,
             blocks: Config | None = None
             ) -> Callable[..., st.SearchStrategy[AttentionProblem]]:
    """``Family.cases`` of ``case_type``: ``cases(without=..., dtypes=...)`` draws its
    cases, in ``dtypes`` (a subset of the kernel's) where given; the kernel's own fields
    from ``config`` (its choices) and ``blocks`` (its block sizes), drawn last.

    ``sizes`` (the ``large-sizes`` property): ``batch``, ``tokens`` (q_len = kv_len),
    ``heads`` (kv_heads = heads) and ``head_dim`` drawn log-uniformly from their spans
    (:func:`~kernel_harness.records.claims.log_sizes`: the simplest draw is each span's
    top) instead of the kernel's drawn lists; ``options``: draw flags forced on or off (a
    claimed size's ``causal``, ``segments``); without them the draws are unchanged."""

    @st.composite
    def cases(draw: st.DrawFn, *, without: frozenset[str] = frozenset(),
              dtypes: tuple[str, ...] = case_type.FEATURES.dtypes,
              sizes: Mapping[str, Span] | None = None,
              options: Mapping[str, bool] | None = None) -> AttentionProblem:
        check_without(case_type, without)
        features = case_type.FEATURES
        undrawn = sorted(features.optional & FAMILY_DRAWN) + (
            ["static masks"] if features.static_masks else [])
        if undrawn:
            raise ValueError(f"the attention problem's strategy does not draw {undrawn} yet: "
                             "give the family its own cases strategy")
        if not dtypes or set(dtypes) - set(features.dtypes):
            raise ValueError(f"dtypes must be a non-empty subset of {features.dtypes}, got "
                             f"{dtypes}")
        lengths, q_only = features.lengths, features.q_only_lengths
        if "unaligned-lengths" in without:
            lengths, q_only = ALIGNED_LENGTHS, ()
        on = _options(draw, features, without)
        if options is not None:
            on.update(options)
        dtype = draw(st.sampled_from(dtypes))
        if sizes is not None:
            return draw(_large(case_type, config, blocks, on, dtype, sizes))
        batch = draw(st.integers(1, features.max_batch))
        kv_len = draw(st.sampled_from(lengths))
        q_len = draw(st.sampled_from(lengths + q_only)) if on["differ"] else kv_len
        if features.causal_q_le_kv and on["causal"] and q_len > kv_len:
            q_len, kv_len = kv_len, q_len
        if not features.query_axis:
            q_len = 1
        kv_heads = draw(st.sampled_from(features.kv_head_counts))
        heads = kv_heads * draw(st.sampled_from(features.groups))
        if features.max_batch_heads is not None:
            heads = min(heads, max(1, features.max_batch_heads // batch))
            kv_heads = min(kv_heads, heads)
        if "gqa" in without or not features.takes("gqa") or heads % kv_heads:
            kv_heads = heads
        head_dim = draw(st.sampled_from(features.head_dims))
        fields: dict[str, Any] = {"is_causal": on["causal"]}
        if on["bias"]:
            fields["bias"] = draw(st.sampled_from(features.broadcasts))
        if on["mask"]:
            fields["mask"] = draw(st.sampled_from(features.broadcasts))
            fields["mask_keep"] = draw(st.sampled_from((0.7, 0.3, 0.9)))
        if on["scale"]:
            fields["scale"] = draw(explicit_scales(features, head_dim))
        longest = max(q_len, kv_len)
        if on["window"] and longest > 2:
            left = draw(st.integers(0, longest - 2))
            right = 0 if draw(st.booleans()) is False else draw(st.integers(0, longest - 2))
            fields["window"] = (left, right)
        if on["kv-starts"]:
            fields["kv_starts"] = _bound(draw, features, batch,
                                         lambda row: draw(_position(kv_len)))
        if on["kv-lengths"] and (on["kv-starts"] or features.scalar_bounds):
            starts = fields.get("kv_starts")
            fields["kv_lengths"] = _bound(draw, features, batch,
                                          lambda row: _end(draw, kv_len, starts, row))
        elif on["kv-lengths"] and kv_len > 1:  # one key: no shorter length exists
            fields["kv_lengths"] = _short_lengths(draw, batch, kv_len, lowest=1)
        if on["q-lengths"] and q_len > 1:
            fields["q_lengths"] = _short_lengths(draw, batch, q_len, lowest=0)
        if on["segments"] and (q_len == kv_len or not features.shared_segments):
            fields["q_segments"], fields["kv_segments"] = draw(segment_layouts(
                batch, q_len, kv_len, causal=on["causal"], shared=features.shared_segments))
        fields["logit_scale"] = draw(st.sampled_from(
            logit_scales_for(dtype, calibrated=dtype in features.calibrated)))
        seed = draw(st.integers(0, 2**31 - 1))
        if on["mask"]:
            fields["empty_row"] = draw(st.booleans())
        if len(features.alignments) > 1:
            fields["alignment"] = draw(st.sampled_from(features.alignments))
        else:
            fields["alignment"] = features.alignments[0]
        problem = AttentionProblem(
            dtype=dtype, seed=seed, batch=batch, q_len=q_len, kv_len=kv_len, q_heads=heads,
            kv_heads=kv_heads, head_dim=head_dim, **fields)
        own = {**(draw(config(problem)) if config is not None else {}),
               **(draw(blocks(problem)) if blocks is not None else {})}
        case = case_type(**{f.name: getattr(problem, f.name)
                            for f in dataclasses.fields(AttentionProblem)}, **own)
        assume(drawable(case))
        return case

    return cases


@st.composite
def _large(draw: st.DrawFn, case_type: type[AttentionProblem], config: Config | None,
           blocks: Config | None, on: Mapping[str, bool], dtype: str,
           sizes: Mapping[str, Span]) -> AttentionProblem:
    """A case at large sizes (``problems``' ``sizes``): the sizes from their spans, q_len =
    kv_len, no GQA, causal and segments as ``on`` says, an explicit scale where ``on``
    draws one, the logit scale and the data seed as :func:`problems` draws them; the
    kernel's own fields from ``config`` and ``blocks``."""
    features = case_type.FEATURES
    batch, tokens = draw(log_sizes(sizes["batch"])), draw(log_sizes(sizes["tokens"]))
    heads, head_dim = draw(log_sizes(sizes["heads"])), draw(log_sizes(sizes["head_dim"]))
    fields: dict[str, Any] = {"is_causal": on["causal"]}
    if on.get("scale") and (features.scales or features.unit_scale):
        fields["scale"] = draw(explicit_scales(features, head_dim))
    if on.get("segments"):
        fields["q_segments"], fields["kv_segments"] = draw(segment_layouts(
            batch, tokens, tokens, causal=on["causal"], shared=features.shared_segments))
    fields["logit_scale"] = draw(st.sampled_from(
        logit_scales_for(dtype, calibrated=dtype in features.calibrated)))
    fields["alignment"] = draw(st.sampled_from(features.alignments))
    problem = AttentionProblem(
        dtype=dtype, seed=draw(st.integers(0, 2**31 - 1)), batch=batch, q_len=tokens,
        kv_len=tokens, q_heads=heads, kv_heads=heads, head_dim=head_dim, **fields)
    own = {**(draw(config(problem)) if config is not None else {}),
           **(draw(blocks(problem)) if blocks is not None else {})}
    case = case_type(**{f.name: getattr(problem, f.name)
                        for f in dataclasses.fields(AttentionProblem)}, **own)
    if on.get("segments") and not drawable(case):
        # The simplest layout (one document) would be rejected, and the first example,
        # meant to be at the caps, with it: two documents, the second from mid-context.
        half = ((0, tokens // 2), (1, tokens - tokens // 2))
        case = dataclasses.replace(case, q_segments=(half,) * batch,
                                   kv_segments=(half,) * batch)
    assume(drawable(case))
    return case


def effective_options(case: AttentionProblem) -> list[str]:
    """The masking fields (:data:`~.problem.MASKING`) whose removal would change which
    keys some row sees."""
    vis = case.visible()
    return [o for o in MASKING if not np.array_equal(vis, case.visible(without=o))]


def drawable(case: AttentionProblem) -> bool:
    """Whether the strategy keeps ``case``: every masking option on has an effect (a
    window wider than the causal reach, lengths equal to the sequence... would hide an
    implementation ignoring it), and some row sees two keys (else dq/dk/dbias are zero).
    With segments, most rows that see a key see two: a row that sees one has exactly zero
    dq and dbias, and where nearly all rows are like that the rounding noise of those rows
    dominates dq's scale."""
    used = {o for o in MASKING if getattr(case, o) not in (None, False)}
    if not used <= set(effective_options(case)):
        return False
    if not case.FEATURES.gradients:  # no dq/dk to vanish: one-key and keyless rows are fine
        return True
    seen = case.visible().sum(-1)
    if case.q_segments is not None and 4 * int((seen >= 2).sum()) < int((seen >= 1).sum()):
        return False
    return bool((seen >= 2).any())


def data_draws(case: AttentionProblem) -> st.SearchStrategy[AttentionProblem]:
    """``Family.data_draws``: cases of ``case``'s compiled program, another data seed and
    logit scale (large ones where :func:`calibrated`); the seed also draws a mask's values,
    so a draw of a case the strategy keeps must still be one it keeps (:func:`drawable`)."""
    scales = logit_scales_for(case.dtype, calibrated=calibrated(case))
    draws = st.builds(lambda seed, scale: dataclasses.replace(case, seed=seed, logit_scale=scale),
                      st.integers(0, 2**31 - 1), st.sampled_from(scales))
    return draws.filter(drawable) if drawable(case) else draws
