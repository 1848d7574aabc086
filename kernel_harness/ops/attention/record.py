"""What a kernel's ``Family`` record takes from the attention problem, written once: the
strategy and data draws, the labels (:mod:`.events`), the exclusion and the metamorphic
hooks (:mod:`.problem_hooks`), the reference over the op's program, output axes.

A family gives its case type (an :class:`~.problem.AttentionProblem` with its
:class:`~.features.Features`), its own configuration's strategy and labels, and its
``traceable`` where it has one; :func:`problem_record` returns the rest.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from kernel_harness.ops.attention.events import LABELS, events
from kernel_harness.ops.attention.problem import AttentionProblem
from kernel_harness.ops.attention.problem_hooks import (
    constrain,
    kv_head,
    may_be_nonfinite,
    metamorphic,
    option_toggles,
    valid,
)
from kernel_harness.ops.attention.program import AttentionCall, Definition, references
from kernel_harness.ops.attention.strategy import (
    Config,
    data_draws,
    optional_features,
    problems,
)
from kernel_harness.ops.attention.vocabulary import output_axes, query_axis
from kernel_harness.records.hooks import Toggle

__all__ = ["LABELS", "attention_call", "constrain", "definition", "events", "may_be_nonfinite",
           "narrowed", "option_toggles", "problem_record", "valid"]

def definition(case: AttentionProblem) -> Definition:
    """The op's options as the case's kernel defines them: its layout, the case's scale
    (the bias after it, or before with ``Features.bias_before_scale``) and soft cap, where
    its denominator divides, the magnitudes it declares (the bias and sink gradients' only
    with a bias and with sinks)."""
    f = case.FEATURES
    judged = f.gradients and (f.magnitude_dtypes is None or case.dtype in f.magnitude_dtypes)
    present = {"dbias": case.bias is not None, "dsinks": case.sinks}
    magnitudes = tuple(m for m in f.magnitudes if present.get(m, True) and judged)
    normalize = {} if f.normalize is None else {"normalize": f.normalize}
    return Definition(layout=f.layout, scale=case.effective_scale,
                      bias_before_scale=f.bias_before_scale, soft_cap=case.soft_cap,
                      lse=f.lse, magnitudes=magnitudes, design=f.precision_design, **normalize,
                      **case.definition_options())


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
                          kv_starts=given.get("kv_starts"), segments=segments)
    absent = (case.broadcast_shape("full") if f.absent_dbias == "full" else (1, 1, 1, 1))
    q, do = given["q"], given.get("do")
    if not f.query_axis:  # the op's program takes a query axis of length 1
        q, do = (None if x is None else np.expand_dims(x, query_axis(f.layout)) for x in (q, do))
    empty = {f.output("dbias"): absent} if _absent_dbias(case) else {}
    if f.takes("sinks") and not case.sinks:  # an empty sink gradient, and its scale
        empty |= {f.output("dsinks"): (0,), f"{f.output('dsinks')}:magnitude": (0,)}
    return AttentionCall(
        definition=definition(case),
        q=q, k=given["k"], v=given["v"], do=do,
        bias=given.get("bias") if case.bias else None, vis=vis,
        sinks=given.get("sinks") if case.sinks else None,
        names=dict(f.outputs), absent=empty)


def _absent_dbias(case: AttentionProblem) -> bool:
    """Whether the kernel gives a (zero) bias gradient the case has no bias for."""
    f = case.FEATURES
    return f.gradients and f.takes("bias") and case.bias is None


def _not_compared(case_type: type[AttentionProblem],
                  config_not_compared: Callable[[Any], Mapping[str, str]] | None
                  ) -> Callable[[Any], dict[str, str]]:
    dbias = case_type.FEATURES.output("dbias")

    def not_compared(case: AttentionProblem) -> dict[str, str]:
        """The bias gradient of a case without a bias, the sink gradient of one without
        sinks; then the kernel's own."""
        own = dict(config_not_compared(case)) if config_not_compared else {}
        absent = {dbias: "no bias in this case"} if _absent_dbias(case) else {}
        if case.FEATURES.takes("sinks") and not case.sinks:
            absent[case.FEATURES.output("dsinks")] = "no sinks in this case"
        return absent | own

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


def _one_query(f: Any, reference: Callable[..., dict[str, np.ndarray]]
               ) -> Callable[..., dict[str, np.ndarray]]:
    """``reference`` of a one-query kernel (``Features.query_axis`` False): its outputs
    without the op's query axis of length 1."""
    rows = {f.output(n) for n in ("out", "dq")} | {f"{f.output('dq')}:magnitude"}

    def one_query(*args: Any) -> dict[str, np.ndarray]:
        out = reference(*args)
        for name in rows & set(out):
            out[name] = np.take(out[name], 0, axis=query_axis(f.layout))
        if f.lse and f.output("lse") in out:
            out[f.output("lse")] = out[f.output("lse")][..., 0]
        return out

    one_query.__doc__ = reference.__doc__
    return one_query


def _output_axes(f: Any) -> dict[str, tuple[str, ...]]:
    """The output axes in the kernel's layout (without the query axis of a one-query
    kernel)."""
    bias_axes = {f.output("dbias"): ("batch", "head", "query", "key")} if f.takes("bias") else {}
    axes = output_axes(f.layout, kv_head=kv_head(f), **bias_axes)
    if not f.gradients:
        axes = {f.output("out"): axes["out"]}
    if f.lse:
        axes[f.output("lse")] = ("batch", "head", "query")
    if f.takes("sinks"):
        axes[f.output("dsinks")] = ("head",)
    if not f.query_axis:
        axes = {k: tuple(a for a in v if a != "query") for k, v in axes.items()}
    return axes


def problem_record(case_type: type[AttentionProblem], *, config: Config | None = None,
                   blocks: Config | None = None,
                   config_events: Callable[[Any], Sequence[str]] = lambda case: (),
                   config_not_compared: Callable[[Any], Mapping[str, str]] | None = None,
                   config_toggles: Callable[[Any], list[Toggle]] | None = None,
                   traceable: Callable[..., Any] | None = None, shardable: bool = False,
                   tpu_device_kind: str | None = None) -> dict[str, Any]:
    """``Family`` fields of a kernel whose case type is ``case_type``: its cases (the
    kernel's configuration from ``config``), data draws, labels (the problem's, then
    ``config_events``), ``valid``, what is not compared (then ``config_not_compared``),
    optional features and their narrowing, reference and low-precision twin, output
    axes, the lse of a row without keys (-inf) where the kernel defines such rows, and
    metamorphic hooks (option toggles, then ``config_toggles``; block-size invariance
    over ``blocks``: the kernel's block ``Config`` strategy, drawn once for the cases and
    again for the variants)."""
    f = case_type.FEATURES
    reference, low_precision_reference = references(attention_call)
    if not f.query_axis:
        reference = _one_query(f, reference)
        low_precision_reference = _one_query(f, low_precision_reference)
    # A -inf lse in the reference: rows without keys the kernel defines (zero), and padding
    # rows (past q_lengths), which are always judged.
    keyless_lse = f.lse is not None and (f.empty_rows == "zero" or f.takes("q-lengths"))
    return dict(
        case_type=case_type, cases=problems(case_type, config=config, blocks=blocks),
        data_draws=data_draws,
        events=lambda case: [*events(case), *config_events(case)], valid=valid,
        not_compared=_not_compared(case_type, config_not_compared),
        optional=optional_features(case_type), narrowed=narrowed, reference=reference,
        low_precision_reference=low_precision_reference,
        output_axes=_output_axes(f),
        nonfinite_reference_ok=frozenset({f.output("lse")} if keyless_lse else ()),
        metamorphic=metamorphic(case_type, traceable=traceable, shardable=shardable,
                                blocks=blocks, config_toggles=config_toggles,
                                tpu_device_kind=tpu_device_kind))
