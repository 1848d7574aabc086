"""The attention problem's one strategy: cases of a kernel's case type drawn from its
:class:`~.features.Features`, every option drawn so that it changes what some row sees.

Causal attention, unequal lengths and a mask are drawn 3 times in 4, every other option
half the time (an option the kernel does not take, or that ``--without`` names, never),
the logit scale from :func:`~kernel_harness.core.case.logit_scales_for`. Which options are
on comes first: Hypothesis varies early choices most. Shrinks towards float32, batch 1,
equal lengths, one head, no options. The kernel's own configuration (its case type's extra
fields) comes from its ``config`` strategy, drawn last.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from kernel_harness.core.case import logit_scales_for
from kernel_harness.ops.attention.features import ALIGNED_LENGTHS, FIELD_OF, OPTIONAL
from kernel_harness.ops.attention.problem import MASKING, AttentionProblem

#: The draw order of the options (``differ``: q_len != kv_len), and how often each is on
#: (in 4).
_ORDER = (("causal", 3), ("differ", 3), ("bias", 2), ("mask", 3), ("scale", 2),
          ("window", 2), ("kv-lengths", 2), ("q-lengths", 2))
#: The draw flag of each narrowing feature.
_FLAG = {**{f: f for f in FIELD_OF}, "q-len-ne-kv-len": "differ"}

Config = Callable[[AttentionProblem], st.SearchStrategy[dict[str, Any]]]


def _mostly(draw: st.DrawFn, in_4: int) -> bool:
    """True about ``in_4`` times in 4; shrinks towards False."""
    return draw(st.integers(0, 3)) >= 4 - in_4


def _short_lengths(draw: st.DrawFn, batch: int, length: int, *, lowest: int) -> tuple[int, ...]:
    """Per-batch lengths in ``[lowest, length]``, at least one shorter than ``length``."""
    first = draw(st.integers(lowest, length - 1))
    return (first, *(draw(st.integers(lowest, length)) for _ in range(batch - 1)))


def check_without(case_type: type[AttentionProblem], without: frozenset[str]) -> None:
    """Raises for a ``--without`` name the kernel's features do not know."""
    unknown = set(without) - set(optional_features(case_type))
    if unknown:
        raise ValueError(f"unknown optional features {sorted(unknown)}; known: "
                         f"{sorted(optional_features(case_type))}")


def optional_features(case_type: type[AttentionProblem]) -> dict[str, str]:
    """``Family.optional``: the op's optional features this kernel takes, described."""
    return {f: why for f, why in OPTIONAL.items() if case_type.FEATURES.takes(f)}


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
    from ``config`` (its choices) and ``blocks`` (its block sizes), drawn last."""

    @st.composite
    def cases(draw: st.DrawFn, *, without: frozenset[str] = frozenset(),
              dtypes: tuple[str, ...] = case_type.FEATURES.dtypes) -> AttentionProblem:
        check_without(case_type, without)
        features = case_type.FEATURES
        if not dtypes or set(dtypes) - set(features.dtypes):
            raise ValueError(f"dtypes must be a non-empty subset of {features.dtypes}, got "
                             f"{dtypes}")
        lengths, q_only = features.lengths, features.q_only_lengths
        if "unaligned-lengths" in without:
            lengths, q_only = ALIGNED_LENGTHS, ()
        on = _options(draw, features, without)
        dtype = draw(st.sampled_from(dtypes))
        batch = draw(st.integers(1, features.max_batch))
        kv_len = draw(st.sampled_from(lengths))
        q_len = draw(st.sampled_from(lengths + q_only)) if on["differ"] else kv_len
        kv_heads = draw(st.sampled_from((1, 2)))
        heads = kv_heads * draw(st.sampled_from((1, 2, 3)))
        if "gqa" in without or not features.takes("gqa"):
            kv_heads = heads
        head_dim = draw(st.sampled_from(features.head_dims))
        fields: dict[str, Any] = {"is_causal": on["causal"]}
        if on["bias"]:
            fields["bias"] = draw(st.sampled_from(features.broadcasts))
        if on["mask"]:
            fields["mask"] = draw(st.sampled_from(features.broadcasts))
            fields["mask_keep"] = draw(st.sampled_from((0.7, 0.3, 0.9)))
        if on["scale"]:
            fields["scale"] = draw(st.sampled_from((0.5, 2.0, 1.0))) / math.sqrt(head_dim)
        longest = max(q_len, kv_len)
        if on["window"] and longest > 2:
            left = draw(st.integers(0, longest - 2))
            right = 0 if draw(st.booleans()) is False else draw(st.integers(0, longest - 2))
            fields["window"] = (left, right)
        if on["kv-lengths"]:
            fields["kv_lengths"] = _short_lengths(draw, batch, kv_len, lowest=1)
        if on["q-lengths"] and q_len > 1:
            fields["q_lengths"] = _short_lengths(draw, batch, q_len, lowest=0)
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


def effective_options(case: AttentionProblem) -> list[str]:
    """The masking fields (:data:`~.problem.MASKING`) whose removal would change which
    keys some row sees."""
    vis = case.visible()
    return [o for o in MASKING if not np.array_equal(vis, case.visible(without=o))]


def drawable(case: AttentionProblem) -> bool:
    """Whether the strategy keeps ``case``: every masking option on has an effect (a
    window wider than the causal reach, lengths equal to the sequence... would hide an
    implementation ignoring it), and some row sees two keys (else dq/dk/dbias are zero)."""
    used = {o for o in MASKING if getattr(case, o) not in (None, False)}
    return used <= set(effective_options(case)) and bool((case.visible().sum(-1) >= 2).any())


def data_draws(case: AttentionProblem) -> st.SearchStrategy[AttentionProblem]:
    """``Family.data_draws``: cases of ``case``'s compiled program, another data seed and
    logit scale; the seed also draws a mask's values, so a draw must still be one the
    strategy keeps (:func:`drawable`)."""
    scales = logit_scales_for(case.dtype, calibrated=case.dtype in case.FEATURES.calibrated)
    return st.builds(lambda seed, scale: dataclasses.replace(case, seed=seed, logit_scale=scale),
                     st.integers(0, 2**31 - 1), st.sampled_from(scales)).filter(drawable)
