"""The hooks a kernel's ``Family`` record takes from the attention problem, written once:
the one exclusion (``valid``, what may be non-finite, the ``constrain`` hook, all from
:meth:`~.arrays.ProblemArrays.rows_outside`) and the metamorphic hooks (roles in the
kernel's layout and names, visibility and segment ids from the description, option
toggles, GQA as MHA, block variants, one shard's case). :mod:`.record` puts them on the
record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from kernel_harness.ops.attention.metamorphic import as_mha_hook, shard_case, zero_cotangent
from kernel_harness.ops.attention.problem import AttentionProblem
from kernel_harness.ops.attention.strategy import Config
from kernel_harness.ops.attention.vocabulary import roles
from kernel_harness.records.hooks import Metamorphic, Toggle, toggles

#: The problem's fields that hold one entry per batch row (a shard keeps its rows').
PER_ROW = ("q_lengths", "kv_lengths", "kv_starts", "q_segments", "kv_segments")


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
    the lse of a row that sees no key and no sink is -inf."""
    f, rows = case.FEATURES, case.rows_outside_in_layout()
    out = {f.output("out"): rows} if rows.any() else {}
    keyless = _lse_rows(case, case.keyless_lse_rows())
    if f.lse and keyless.any():
        out[f.output("lse")] = keyless
    return out


def constrain(case: AttentionProblem, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The contract's zero cotangent on the rows outside it, after a metamorphic change."""
    name = case.FEATURES.names.get("do")
    return inputs if name is None else zero_cotangent(inputs, case.rows_outside_in_layout(), name)


def option_toggles(case: AttentionProblem) -> list[Toggle]:
    """The case without each masking option it turns on (static masks as one ``full``
    mask), without its bias, its soft cap, and its sinks where no row needs them."""
    masks = case.head_masks() or ()
    return toggles(
        case,
        (f"mask {' / '.join(sorted(set(masks)))}", any(m != "full" for m in masks),
         {"masks": ("full",)}),
        ("causal", case.is_causal, {"is_causal": False}),
        ("segment ids", case.q_segments is not None, {"q_segments": None, "kv_segments": None}),
        ("window", case.window is not None, {"window": None}),
        ("mask", case.mask is not None, {"mask": None, "empty_row": False}),
        ("kv_lengths", case.kv_lengths is not None, {"kv_lengths": None}),
        ("kv_starts", case.kv_starts is not None, {"kv_starts": None}),
        ("q_lengths", case.q_lengths is not None, {"q_lengths": None}),
        (f"bias ({case.bias})", case.bias is not None, {"bias": None}, "values"),
        (f"soft cap {case.soft_cap}", case.soft_cap is not None, {"soft_cap": None}, "values"),
        ("sinks", case.sinks and not case.rows_without_keys().any(), {"sinks": False},
         "values"))


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
    batch = ("batch",) if f.segment_rows == "per-row" else ()
    # One array for queries and keys (Features.shared_segments) ends with the keys' role.
    extra = {n[x]: r for x, r in (("bias", full), ("mask", full),
                                  *((b, ("batch",)) for b in rows),
                                  ("segment_ids_q", (*batch, "query")),
                                  ("segment_ids_kv", (*batch, "key")),
                                  ("sinks", ("head",))) if x in n}
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
                config_toggles: Callable[[Any], list[Toggle]] | None = None,
                tpu_device_kind: str | None = None) -> Metamorphic:
    """The metamorphic hooks of ``case_type``'s kernel: roles in its layout and names,
    visibility and segment ids from the description, option toggles (then the kernel's
    own, ``config_toggles``), GQA as MHA (the fields the case type's ``as_mha_fields``
    changes too), the exclusion (out's rows outside the contract, the zero cotangent);
    ``traceable`` (lowering, sharding; for the TPU ``tpu_device_kind`` where the kernel
    asks the generation while tracing), where ``shardable`` one shard's case, and block
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
        tpu_device_kind=tpu_device_kind,
        local_case=local_case if shardable else None,
    )


def local_case(case: AttentionProblem, mesh: dict[str, int]) -> AttentionProblem | None:
    """One shard's case (:func:`~.metamorphic.shard_case`): the batch rows and heads of
    one shard; None where the mesh does not divide them, or splits heads whose static
    masks differ (a static mask is built into the one kernel every shard runs)."""
    if mesh.get("head", 1) > 1 and case.masks is not None:
        if len(set(case.masks)) > 1:
            return None
        case = dataclasses.replace(case, masks=case.masks[:1])  # one for every local head
    return shard_case(case, mesh, per_row=PER_ROW)


def kv_head(features: Any) -> str:
    """The axis role of k and v's heads: ``kv_head``, or ``head`` for a kernel without
    grouped-query attention (its kv heads are its query heads)."""
    return "kv_head" if features.takes("gqa") else "head"


