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
from kernel_harness.ops.attention.vocabulary import output_axes, query_axis, roles
from kernel_harness.spec.hooks import Metamorphic, Toggle, toggles

#: Every label of a fact of the attention problem (:func:`events`): one fact, one label,
#: in every family of the op (a kernel's own configuration labels itself apart).
LABELS: frozenset[str] = frozenset({
    "float32", "bfloat16", "float16", "gqa", "mqa", "q-len<kv-len", "q-len>kv-len", "causal",
    "explicit-scale", "window", "window-left-only", "kv-lengths", "q-lengths", "padding-rows",
    "rows-without-keys", "bottom-right", "segments", "length-1-segment", "unsorted-segments",
    "several-segments", "repeated-segment-id", "kv-starts", "scalar-kv-starts",
    "scalar-kv-lengths",
    *(f"{what}-{kind}" for what in ("bias", "mask")
      for kind in ("full", "batch-shared", "head-shared")),
})


def events(case: AttentionProblem) -> list[str]:
    """The problem's labels (:data:`LABELS` and :func:`logits_label`): dtype, head sharing,
    unequal lengths, each option on, the segment layouts' shapes (:func:`~.events.
    segment_events`), padding rows, rows that see no key."""
    lengths = length_events(case.q_len, case.kv_len) if case.FEATURES.query_axis else []
    ev = [case.dtype, *sharing_events(case), *lengths]
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
    for name, label in (("kv_lengths", "kv-lengths"), ("kv_starts", "kv-starts")):
        value = getattr(case, name)
        if value is not None:
            ev += [label, *([f"scalar-{label}"] if isinstance(value, int) else [])]
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


def _lse_rows(case: AttentionProblem, rows: np.ndarray) -> np.ndarray:
    """A ``(batch, q_heads, q_len)`` row mask in the lse's shape (no query axis for a
    one-query kernel)."""
    return rows if case.FEATURES.query_axis else rows[:, :, 0]


def valid(case: AttentionProblem) -> dict[str, np.ndarray]:
    """out, lse and dq outside the contract's rows (:meth:`~.problem.AttentionProblem.
    rows_outside`) are not judged."""
    rows = case.rows_outside_in_layout()
    if not rows.any():
        return {}
    f = case.FEATURES
    out = {f.output(n): ~rows for n in (("out", "dq") if f.gradients else ("out",))}
    if f.lse:
        out[f.output("lse")] = ~_lse_rows(case, case.rows_outside())
    return out


def may_be_nonfinite(case: AttentionProblem) -> dict[str, np.ndarray]:
    """out on the rows outside the contract may be anything, non-finite values included;
    the lse of a row that sees no key is -inf."""
    f, rows = case.FEATURES, case.rows_outside_in_layout()
    out = {f.output("out"): rows} if rows.any() else {}
    keyless = _lse_rows(case, case.rows_without_keys())
    if f.lse and keyless.any():
        out[f.output("lse")] = keyless
    return out


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
                      bias_before_scale=f.bias_before_scale, lse=f.lse, magnitudes=magnitudes,
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
    return AttentionCall(
        definition=definition(case),
        q=q, k=given["k"], v=given["v"], do=do,
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
        ("kv_starts", case.kv_starts is not None, {"kv_starts": None}),
        ("q_lengths", case.q_lengths is not None, {"q_lengths": None}),
        (f"bias ({case.bias})", case.bias is not None, {"bias": None}, "values"))


def block_variants(blocks: Config) -> Callable[[AttentionProblem], Any]:
    """``Metamorphic.block_variants`` from the kernel's block strategy: the same case with
    its blocks drawn again (the strategy that drew them, so no block size is drawn twice)."""
    def variants(case: AttentionProblem) -> Any:
        return blocks(case).map(lambda own: dataclasses.replace(case, **own))

    return variants


def _roles(f: Any) -> dict[str, tuple[str, ...]]:
    """The metamorphic axis roles of the kernel's inputs (no query axis for a one-query
    kernel; no per-row role for bounds it may take as one scalar)."""
    n = f.names
    full = ("batch", "head", "query", "key")
    rows = () if f.scalar_bounds else ("q_lengths", "kv_lengths", "kv_starts")
    # One array for queries and keys (Features.shared_segments) ends with the keys' role.
    extra = {n[x]: r for x, r in (("bias", full), ("mask", full),
                                  *((b, ("batch",)) for b in rows),
                                  ("segment_ids_q", ("batch", "query")),
                                  ("segment_ids_kv", ("batch", "key"))) if x in n}
    qkv = roles(f.layout, q=n["q"], k=n["k"], v=n["v"], do=n.get("do", "do"),
                kv_head=kv_head(f), **extra)
    if not f.gradients:
        qkv.pop(n.get("do", "do"))
    if not f.query_axis:
        for name in (n["q"], n.get("do")):
            if name in qkv:
                qkv[name] = tuple(r for r in qkv[name] if r != "query")
    return qkv


def metamorphic(case_type: type[AttentionProblem], *, traceable: Callable[..., Any] | None = None,
                shardable: bool = False, blocks: Config | None = None,
                config_toggles: Callable[[Any], list[Toggle]] | None = None) -> Metamorphic:
    """The metamorphic hooks of ``case_type``'s kernel: roles in its layout and names,
    visibility and segment ids from the description, option toggles (then the kernel's
    own, ``config_toggles``), GQA as MHA (the fields the case type's ``as_mha_fields``
    changes too), the exclusion (out's rows outside the contract, the zero cotangent);
    ``traceable`` (lowering, sharding), where ``shardable`` one shard's case, and block
    variants from ``blocks``."""
    f = case_type.FEATURES
    n = f.names
    mha_fields = getattr(case_type, "as_mha_fields", None)
    toggles_of = option_toggles if config_toggles is None else (
        lambda case: [*option_toggles(case), *config_toggles(case)])
    return Metamorphic(
        roles=_roles(f),
        block_variants=block_variants(blocks) if blocks is not None else None,
        visible=lambda case: case.visible(),
        segments=(lambda case: case.segment_arrays()) if f.takes("segments") else None,
        option_toggles=toggles_of,
        as_mha=as_mha_hook(layout=f.layout, kv=(n["k"], n["v"]), mha_fields=mha_fields)
        if f.takes("gqa") else None,
        logit_input=n["q"],
        may_be_nonfinite=may_be_nonfinite,
        constrain=constrain,
        traceable=traceable,
        local_case=(lambda case, mesh: shard_case(case, mesh, per_row=(
            "q_lengths", "kv_lengths", "kv_starts", "q_segments", "kv_segments")))
        if shardable else None,
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
    if not f.query_axis:
        axes = {k: tuple(a for a in v if a != "query") for k, v in axes.items()}
    return axes


def problem_record(case_type: type[AttentionProblem], *, config: Config | None = None,
                   blocks: Config | None = None,
                   config_events: Callable[[Any], Sequence[str]] = lambda case: (),
                   config_not_compared: Callable[[Any], Mapping[str, str]] | None = None,
                   config_toggles: Callable[[Any], list[Toggle]] | None = None,
                   traceable: Callable[..., Any] | None = None, shardable: bool = False,
                   ) -> dict[str, Any]:
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
    keyless_lse = f.lse is not None and f.empty_rows == "zero"
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
                                blocks=blocks, config_toggles=config_toggles))
