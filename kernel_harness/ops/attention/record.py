"""What a kernel's ``Family`` record takes from the attention problem, written once: the
strategy and data draws, the labels, the exclusion (``valid`` and the ``constrain`` hook),
the reference over the op's program, output axes and the metamorphic hooks.

A family gives its case type (an :class:`~.problem.AttentionProblem` with its
:class:`~.features.Features`), its own configuration's strategy and labels, and its
``traceable`` where it has one; :func:`problem_record` returns the rest.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from kernel_harness.ops.attention.events import (
    length_events,
    logits_label,
    segment_events,
    sharing_events,
)
from kernel_harness.ops.attention.metamorphic import as_mha_hook, shard_case, zero_cotangent
from kernel_harness.ops.attention.problem import AttentionProblem
from kernel_harness.ops.attention.program import AttentionCall, Definition, references
from kernel_harness.ops.attention.strategy import (
    Config,
    data_draws,
    optional_features,
    problems,
)
from kernel_harness.ops.attention.vocabulary import output_axes, roles
from kernel_harness.spec.hooks import Metamorphic, Toggle, toggles

#: Every label of a fact of the attention problem (:func:`events`): one fact, one label,
#: in every family of the op (a kernel's own configuration labels itself apart).
LABELS: frozenset[str] = frozenset({
    "float32", "bfloat16", "float16", "gqa", "mqa", "q-len<kv-len", "q-len>kv-len", "causal",
    "explicit-scale", "window", "window-left-only", "kv-lengths", "q-lengths", "padding-rows",
    "rows-without-keys", "bottom-right", "segments", "length-1-segment", "unsorted-segments",
    "several-segments", "repeated-segment-id",
    *(f"{what}-{kind}" for what in ("bias", "mask")
      for kind in ("full", "batch-shared", "head-shared")),
})


def events(case: AttentionProblem) -> list[str]:
    """The problem's labels (:data:`LABELS` and :func:`logits_label`): dtype, head sharing,
    unequal lengths, each option on, the segment layouts' shapes (:func:`~.events.
    segment_events`), padding rows, rows that see no key."""
    ev = [case.dtype, *sharing_events(case), *length_events(case.q_len, case.kv_len)]
    if case.is_causal:
        ev.append("causal")
    if case.bias is not None:
        ev.append(f"bias-{case.bias}")
    if case.mask is not None:
        ev.append(f"mask-{case.mask}")
    if case.alignment == "bottom-right":
        ev.append("bottom-right")
    if case.scale is not None:
        ev.append("explicit-scale")
    if case.window is not None:
        ev.append("window" if case.window[1] else "window-left-only")
    if case.kv_lengths is not None:
        ev.append("kv-lengths")
    if case.q_lengths is not None:
        ev.append("q-lengths")
        if case.padding_rows().any():
            ev.append("padding-rows")
    if case.q_segments is not None:
        ev += ["segments", *segment_events(case.q_segments, case.kv_segments)]
    if case.rows_without_keys().any():
        ev.append("rows-without-keys")
    ev.append(logits_label(case.logit_scale))
    return ev


def valid(case: AttentionProblem) -> dict[str, np.ndarray]:
    """out and dq outside the contract's rows (:meth:`~.problem.AttentionProblem.
    rows_outside`) are not judged."""
    rows = case.rows_outside_in_layout()
    if not rows.any():
        return {}
    f = case.FEATURES
    return {f.output(n): ~rows for n in (("out", "dq") if f.gradients else ("out",))}


def may_be_nonfinite(case: AttentionProblem) -> dict[str, np.ndarray]:
    """out on the rows outside the contract may be anything, non-finite values included."""
    rows = case.rows_outside_in_layout()
    return {case.FEATURES.output("out"): rows} if rows.any() else {}


def constrain(case: AttentionProblem, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The contract's zero cotangent on the rows outside it, after a metamorphic change."""
    name = case.FEATURES.names.get("do")
    return inputs if name is None else zero_cotangent(inputs, case.rows_outside_in_layout(), name)


def definition(case: AttentionProblem) -> Definition:
    """The op's options as the case's kernel defines them: its layout, the case's scale
    (the bias after it, or before with ``Features.bias_before_scale``), the magnitudes it
    declares (the bias gradient's with a bias)."""
    f = case.FEATURES
    judged = f.gradients and (f.magnitude_dtypes is None or case.dtype in f.magnitude_dtypes)
    magnitudes = tuple(m for m in f.magnitudes if (m != "dbias" or case.bias) and judged)
    return Definition(layout=f.layout, scale=case.effective_scale,
                      bias_before_scale=f.bias_before_scale, lse=f.lse, magnitudes=magnitudes)


def attention_call(case: AttentionProblem, inputs: dict[str, np.ndarray]) -> AttentionCall:
    """The case in the op's program: the kernel's inputs by its names, the visibility from
    the description with the mask, lengths and segment ids the inputs hold (a metamorphic
    change of them is followed), the bias where the kernel adds it."""
    f = case.FEATURES
    given = {op: inputs.get(name) for op, name in f.names.items()}
    segments = ((given["segment_ids_q"], given["segment_ids_kv"])
                if case.q_segments is not None else None)
    vis = case.visibility(causal=case.is_causal, window=case.window,
                          mask=given.get("mask") if case.mask else None,
                          q_lengths=given.get("q_lengths"), kv_lengths=given.get("kv_lengths"),
                          segments=segments)
    absent = (case.broadcast_shape("full") if f.absent_dbias == "full" else (1, 1, 1, 1))
    return AttentionCall(
        definition=definition(case),
        q=given["q"], k=given["k"], v=given["v"], do=given.get("do"),
        bias=given.get("bias") if case.bias else None, vis=vis,
        names=dict(f.outputs),
        absent={f.output("dbias"): absent} if _absent_dbias(case) else {})


def _absent_dbias(case: AttentionProblem) -> bool:
    """Whether the kernel gives a (zero) bias gradient the case has no bias for."""
    f = case.FEATURES
    return f.gradients and f.takes("bias") and case.bias is None


def option_toggles(case: AttentionProblem) -> list[Toggle]:
    """The case without each masking option it turns on, and without its bias."""
    return toggles(
        case,
        ("causal", case.is_causal, {"is_causal": False}),
        ("segment ids", case.q_segments is not None, {"q_segments": None, "kv_segments": None}),
        ("window", case.window is not None, {"window": None}),
        ("mask", case.mask is not None, {"mask": None, "empty_row": False}),
        ("kv_lengths", case.kv_lengths is not None, {"kv_lengths": None}),
        ("q_lengths", case.q_lengths is not None, {"q_lengths": None}),
        (f"bias ({case.bias})", case.bias is not None, {"bias": None}, "values"))


def block_variants(blocks: Config) -> Callable[[AttentionProblem], Any]:
    """``Metamorphic.block_variants`` from the kernel's block strategy: the same case with
    its blocks drawn again (the strategy that drew them, so no block size is drawn twice)."""
    def variants(case: AttentionProblem) -> Any:
        return blocks(case).map(lambda own: dataclasses.replace(case, **own))

    return variants


def metamorphic(case_type: type[AttentionProblem], *, traceable: Callable[..., Any] | None = None,
                shardable: bool = False, blocks: Config | None = None) -> Metamorphic:
    """The metamorphic hooks of ``case_type``'s kernel: roles in its layout and names,
    visibility and segment ids from the description, option toggles, GQA as MHA, the
    exclusion (out's rows outside the contract, the zero cotangent); ``traceable``
    (lowering, sharding), where ``shardable`` one shard's case, and block variants from
    ``blocks``."""
    f = case_type.FEATURES
    n = f.names
    full = ("batch", "head", "query", "key")
    # One array for queries and keys (Features.shared_segments) ends with the keys' role.
    extra = {n[x]: r for x, r in (("bias", full), ("mask", full), ("q_lengths", ("batch",)),
                                  ("kv_lengths", ("batch",)),
                                  ("segment_ids_q", ("batch", "query")),
                                  ("segment_ids_kv", ("batch", "key"))) if x in n}
    qkv = roles(f.layout, q=n["q"], k=n["k"], v=n["v"], do=n.get("do", "do"),
                kv_head=kv_head(f), **extra)
    if not f.gradients:
        qkv.pop(n.get("do", "do"))
    return Metamorphic(
        roles=qkv,
        block_variants=block_variants(blocks) if blocks is not None else None,
        visible=lambda case: case.visible(),
        segments=(lambda case: case.segment_arrays()) if f.takes("segments") else None,
        option_toggles=option_toggles,
        as_mha=as_mha_hook(layout=f.layout, kv=(n["k"], n["v"])) if f.takes("gqa") else None,
        logit_input=n["q"],
        may_be_nonfinite=may_be_nonfinite,
        constrain=constrain,
        traceable=traceable,
        local_case=(lambda case, mesh: shard_case(case, mesh, per_row=(
            "q_lengths", "kv_lengths", "q_segments", "kv_segments"))) if shardable else None,
    )


def kv_head(features: Any) -> str:
    """The axis role of k and v's heads: ``kv_head``, or ``head`` for a kernel without
    grouped-query attention (its kv heads are its query heads)."""
    return "kv_head" if features.takes("gqa") else "head"


def _not_compared(case_type: type[AttentionProblem],
                  config_not_compared: Callable[[Any], Mapping[str, str]] | None
                  ) -> Callable[[Any], dict[str, str]]:
    dbias = case_type.FEATURES.output("dbias")

    def not_compared(case: AttentionProblem) -> dict[str, str]:
        """The bias gradient of a case without a bias; then the kernel's own."""
        own = dict(config_not_compared(case)) if config_not_compared else {}
        return ({dbias: "no bias in this case"} if _absent_dbias(case) else {}) | own

    return not_compared


def narrowed(family: Any, without: frozenset[str]) -> Any:
    """``Family.narrowed``: without ``bias-gradient`` (a bias in the forward only), the
    bias gradient is never compared."""
    if "bias-gradient" not in without:
        return family
    base, dbias = family.not_compared, family.case_type.FEATURES.output("dbias")

    def not_compared(case: AttentionProblem) -> dict[str, str]:
        return {dbias: "declared without a bias gradient (--without bias-gradient)",
                **base(case)}

    return dataclasses.replace(family, not_compared=not_compared)


def problem_record(case_type: type[AttentionProblem], *, config: Config | None = None,
                   blocks: Config | None = None,
                   config_events: Callable[[Any], Sequence[str]] = lambda case: (),
                   config_not_compared: Callable[[Any], Mapping[str, str]] | None = None,
                   traceable: Callable[..., Any] | None = None, shardable: bool = False,
                   ) -> dict[str, Any]:
    """``Family`` fields of a kernel whose case type is ``case_type``: its cases (the
    kernel's configuration from ``config``), data draws, labels (the problem's, then
    ``config_events``), ``valid``, what is not compared (then ``config_not_compared``),
    optional features and their narrowing, reference and low-precision twin, output
    axes, and metamorphic hooks (block-size invariance over ``blocks``: the kernel's
    block ``Config`` strategy, drawn once for the cases and again for the variants)."""
    f = case_type.FEATURES
    reference, low_precision_reference = references(attention_call)
    bias_axes = {f.output("dbias"): ("batch", "head", "query", "key")} if f.takes("bias") else {}
    lse_axes = {f.output("lse"): ("batch", "head", "query")} if f.lse else {}
    axes = output_axes(f.layout, kv_head=kv_head(f), **bias_axes)
    if not f.gradients:
        axes = {f.output("out"): axes["out"]}
    axes |= lse_axes
    return dict(
        case_type=case_type, cases=problems(case_type, config=config, blocks=blocks),
        data_draws=data_draws,
        events=lambda case: [*events(case), *config_events(case)], valid=valid,
        not_compared=_not_compared(case_type, config_not_compared),
        optional=optional_features(case_type), narrowed=narrowed, reference=reference,
        low_precision_reference=low_precision_reference,
        output_axes=axes,
        metamorphic=metamorphic(case_type, traceable=traceable, shardable=shardable,
                                blocks=blocks))
