"""The metamorphic relations: each a function ``body(check, data)`` over one drawn
case, registered in :data:`SPECS` and built into properties by
:func:`~kernel_harness.checks.metamorphic.machinery.build`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hypothesis
import jax.numpy as jnp
import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from kernel_harness.checks.metamorphic.arrays import (
    Influence,
    differences,
    influence,
    is_float,
    location,
    perturb,
    problem_sizes,
    roles_of,
    visibility,
)
from kernel_harness.checks.metamorphic.machinery import (
    ANY_FAMILY,
    TPU_INTERPRETER,
    Check,
    Spec,
    build,
)

# --- the properties -----------------------------------------------------------------------------


def _draw_positions(data: st.DataObject, n: int, label: str) -> np.ndarray:
    """A bool [n] set of positions: an interval (shrinks to the first) or a sparse scatter."""
    if data.draw(st.sampled_from(["interval", "scatter"]), label=f"{label} shape") == "interval":
        lo = data.draw(st.integers(0, n - 1), label=f"{label} start")
        hi = data.draw(st.integers(lo + 1, n), label=f"{label} stop")
        out = np.zeros(n, bool)
        out[lo:hi] = True
        return out
    seed = data.draw(st.integers(0, 2**16), label=f"{label} seed")
    out = np.random.default_rng(seed).random(n) < 0.05
    out[seed % n] = True
    return out


def _invisible_inputs_ignored(check: Check, data: st.DataObject) -> None:
    family, sizes = check.family, problem_sizes(check.family, check.inputs)
    vis = visibility(family, check.case, sizes)
    side = data.draw(st.sampled_from(["keys", "queries"]), label="perturbed side")
    b = sizes["batch"]
    key_pert = np.zeros((b, sizes["key"]), bool)
    query_pert = np.zeros((b, sizes["query"]), bool)
    if side == "keys":
        key_pert[:] = _draw_positions(data, sizes["key"], "keys")
    else:
        query_pert[:] = _draw_positions(data, sizes["query"], "queries")
    inf = influence(vis, key_pert, query_pert, sizes["kv_head"])
    positions = key_pert[0] if side == "keys" else query_pert[0]
    check.notes.append(f"perturbed {side} at positions {_ranges(positions)}")
    base = check.run()
    moved = check.run(inputs=perturb(family, check.case, check.inputs, key_pert=key_pert,
                                     query_pert=query_pert, stream=1))
    # Exact unless the family's contract says why not: an input a result cannot see must
    # not change a bit of it (a leak far below the tolerance is still a leak).
    exact = not check.hooks.invisible_inexact
    checked = check.expect_same(
        base, moved, factor=0.0 if exact else 1.0,
        what=f"they do not depend on the perturbed {side}"
        + ("; bitwise" if exact else f"; within tolerance: {check.hooks.invisible_inexact}"),
        may_change=lambda name, shape: inf.may_change(roles_of(family, name), shape),
    )
    hypothesis.event(f"invisible-inputs: {'vacuous' if not checked else 'checked'} ({side})")


def _ranges(mask: np.ndarray) -> str:
    idx = np.flatnonzero(mask)
    if not idx.size:
        return "none"
    parts, start, prev = [], idx[0], idx[0]
    for i in idx[1:]:
        if i != prev + 1:
            parts.append(f"{start}..{prev}" if prev > start else f"{start}")
            start = i
        prev = i
    parts.append(f"{start}..{prev}" if prev > start else f"{start}")
    return ", ".join(parts[:8]) + (" ..." if len(parts) > 8 else "")


def _segment_isolation(check: Check, data: st.DataObject) -> None:
    family, sizes = check.family, problem_sizes(check.family, check.inputs)
    segs = check.hooks.segments(check.case)
    assume(segs is not None)
    b = sizes["batch"]
    q_ids = np.broadcast_to(np.asarray(segs[0]).reshape(-1, sizes["query"]), (b, sizes["query"]))
    kv_ids = np.broadcast_to(np.asarray(segs[1]).reshape(-1, sizes["key"]), (b, sizes["key"]))
    ids = sorted(set(np.unique(q_ids).tolist()) | set(np.unique(kv_ids).tolist()))
    s = data.draw(st.sampled_from(ids), label="perturbed segment id")
    query_pert, key_pert = q_ids == s, kv_ids == s
    h, hkv = sizes["head"], sizes["kv_head"]
    inf = Influence(
        rows=np.broadcast_to(query_pert[:, None, :], (b, h, sizes["query"])),
        keys=np.broadcast_to(key_pert[:, None, :], (b, hkv, sizes["key"])),
        keys_by_head=np.broadcast_to(key_pert[:, None, :], (b, h, sizes["key"])),
    )
    check.notes.append(f"perturbed every token of segment {s} (queries and keys)")
    base = check.run()
    moved = check.run(inputs=perturb(family, check.case, check.inputs, key_pert=key_pert,
                                     query_pert=query_pert, stream=2))
    check.expect_same(
        base, moved, factor=1.0, what=f"they belong to segments other than {s}",
        may_change=lambda name, shape: inf.may_change(roles_of(family, name), shape),
    )


def _block_size_invariance(check: Check, data: st.DataObject) -> None:
    variant = data.draw(check.hooks.block_variants(check.case), label="block variant")
    if variant == check.case:
        hypothesis.event("block-size-invariance: same blocks drawn")
        return
    _same_inputs(check, variant)
    check.notes.append(f"variant: {variant!r}")
    check.expect_same(check.run(), check.run(case=variant), may_change=None, factor=2.0,
                      what="only block sizes differ")


def _same_inputs(check: Check, other: Any) -> None:
    theirs = other.materialize()
    for name, array in check.inputs.items():
        if name not in theirs or not np.array_equal(theirs[name], array, equal_nan=True):
            raise ValueError(
                f"{check.family.name}: the block variant's input {name!r} differs from the "
                "case's; block_variants must change block sizes only"
            )


def bitwise_changes(check: Check, first: dict, second: dict, what: str) -> None:
    """A problem for every output ``second`` does not reproduce bit for bit (NaN as NaN),
    the extra outputs that must equal another (``Family.same_as``: gpu-norm's ``out_vjp``)
    included, as the bitwise rerun inside matches-reference compares them."""
    axes = {**check.family.output_axes,
            **{name: check.family.output_axes[ref] for name, ref in check.family.same_as.items()
               if ref in check.family.output_axes}}
    for name, names in axes.items():
        a, b = first.get(name), second.get(name)
        if a is None or np.size(a) == 0:
            continue
        if not np.array_equal(a, b, equal_nan=True):
            count, rel, worst, _ = differences(a, b, None, 0.0)
            check.problems.append(
                f"{name}: {what} changed {count} element(s) (bitwise); largest change "
                f"{rel:.3g} x scale at {location(names, worst)}: "
                f"{float(a[worst]):.6g} -> {float(b[worst]):.6g}"
            )


def _deterministic(check: Check, data: st.DataObject) -> None:
    bitwise_changes(check, check.run(), check.run(), "rerunning")


def schedule_text(schedule: dict[str, Any]) -> str:
    """``dma=on_wait grid-seed=7``: a schedule as the reports name it."""
    return f"dma={schedule['dma_execution_mode']} grid-seed={schedule['random_seed']}"


def _schedule_invariance(check: Check, data: st.DataObject) -> None:
    # One schedule, then the same with only the DMA completion order changed and with only
    # the order of the parallel grid dimensions changed: a difference names its cause.
    seed = data.draw(st.integers(0, 2**16), label="grid-order seed")
    other = seed + data.draw(st.integers(1, 2**16), label="second seed's offset")
    base = {"dma_execution_mode": "on_wait", "random_seed": seed}
    first = check.run(backend=check.backend.scheduled(**base))
    for changed, variant in (("only the DMA order", {**base, "dma_execution_mode": "eager"}),
                             ("only the grid order", {**base, "random_seed": other})):
        second = check.run(backend=check.backend.scheduled(**variant))
        bitwise_changes(check, first, second,
                         f"{schedule_text(base)} -> {schedule_text(variant)} ({changed})")


#: The logit scales finite-out draws (1.0: the case's own inputs).
LOGIT_FACTORS = (1.0, 8.0, 32.0)


def largest_finite_factor(x: np.ndarray, factor: float) -> float:
    """``factor``, or the largest of :data:`LOGIT_FACTORS` under it that keeps ``x``'s
    scaled values within half its dtype's range: finite inputs, and finite differences of
    two of them (a float16 softmax row of logits near 2,000 scaled by 32 overflows)."""
    x64 = np.asarray(x, np.float64)
    peak = float(np.max(np.abs(x64[np.isfinite(x64)]), initial=0.0))  # -inf: masked logits
    limit = float(jnp.finfo(x.dtype).max) / 2
    fitting = [f for f in LOGIT_FACTORS if f <= factor and peak * f <= limit]
    return max(fitting, default=1.0)


def _finite_out(check: Check, data: st.DataObject) -> None:
    factor = data.draw(st.sampled_from(LOGIT_FACTORS), label="logit scale")
    inputs = dict(check.inputs)
    name = check.hooks.logit_input
    if factor != 1.0 and name in inputs:
        x = inputs[name]
        factor = largest_finite_factor(x, factor)
        scaled = np.asarray(x, np.float32) * factor
        inputs[name] = scaled.astype(x.dtype)
    # Also unscaled: the hook may make the case's inputs finite (NaN-poisoned cache slots).
    inputs = check.hooks.constrain(check.case, inputs)
    check.notes.append(f"logit input {name!r} scaled by {factor}")
    def finite(key: str, v: Any) -> bool:
        v = np.asarray(v, np.float64)  # -inf logits are masked ones (a softmax's), allowed
        return bool((np.isfinite(v) | (np.isneginf(v) if key == name else False)).all())

    if not all(finite(k, v) for k, v in inputs.items() if is_float(v)):
        raise ValueError(f"{check.family.name}: finite-out drew non-finite inputs")
    outputs = check.run(inputs=inputs)
    allowed = check.hooks.may_be_nonfinite(check.case)
    for out_name in check.family.output_axes:
        arr = np.asarray(outputs.get(out_name, np.zeros(0)), np.float64)
        if arr.size == 0:
            continue
        bad = ~np.isfinite(arr)
        if out_name in allowed:
            bad &= ~np.broadcast_to(allowed[out_name], arr.shape)
        if bad.any():
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            check.problems.append(
                f"{out_name}: {int(bad.sum())} non-finite element(s) for finite inputs, first "
                f"{arr[first]} at {location(check.family.output_axes[out_name], first)}"
            )


def _option_effect(check: Check, data: st.DataObject) -> None:
    toggles = list(check.hooks.option_toggles(check.case))
    assume(toggles)
    toggle = data.draw(st.sampled_from(toggles), label="option turned off")
    family, sizes = check.family, problem_sizes(check.family, check.inputs)
    theirs = toggle.case.materialize()
    # The same data (floating arrays) where shapes agree; structure (ids, masks) as the
    # toggled case describes it.
    inputs = check.hooks.constrain(toggle.case, {
        k: (check.inputs[k] if k in check.inputs and is_float(v)
            and np.shape(check.inputs[k]) == np.shape(v) and check.inputs[k].dtype == v.dtype
            else v)
        for k, v in theirs.items()
    })
    check.notes.append(f"turned off {toggle.name}: {toggle.case!r}")
    with_opt, without = check.run(), check.run(case=toggle.case, inputs=inputs)
    rows_out = [n for n in family.output_axes if "query" in roles_of(family, n)
                and "key" not in roles_of(family, n)]
    if toggle.changes == "visibility":
        before = visibility(family, check.case, sizes)
        after = visibility(family, toggle.case, sizes)
        # A row that sees no key on either side has no defined output (jax.nn gives mean(v)
        # there, a length-padded row 0): outside every contract, so it may change too.
        blind = ~before.any(axis=-1) | ~after.any(axis=-1)
        differ = (before != after).any(axis=-1) | blind
        inf = Influence(rows=differ, keys=np.zeros((1, 1, 1), bool),
                        keys_by_head=np.zeros((1, 1, 1), bool))
        may = lambda name, shape: inf.may_change(roles_of(family, name), shape)  # noqa: E731
        check.expect_same(with_opt, without, may_change=may, factor=2.0, outputs=rows_out,
                          what=f"turning off {toggle.name} leaves their visible keys as they were")
        if not (differ & ~blind).any():
            hypothesis.event(f"option-effect: {toggle.name} changes no row's visibility")
            return
    else:
        may = lambda name, shape: np.ones(shape, bool)  # noqa: E731
    moved, looked = 0.0, 0
    for name in rows_out:
        shape = np.shape(with_opt[name])
        where = check.valid(name, shape) & check.valid(name, shape, toggle.case) & may(name, shape)
        looked += int(where.sum())
        _, rel, _, _ = differences(with_opt[name], without[name], where, 0.0)
        moved = max(moved, rel / check.tolerance(name))
    if not looked:  # every row it changes is outside the contract with or without it
        hypothesis.event(f"option-effect: {toggle.name} changes only rows outside the contract")
        return
    if moved <= 4.0:
        check.problems.append(
            f"turning off {toggle.name} changed no output where it should (largest change "
            f"{moved:.3g} x tolerance): is the option ignored?"
        )


def _gqa_equals_mha(check: Check, data: st.DataObject) -> None:
    converted = check.hooks.as_mha(check.case, check.inputs)
    assume(converted is not None)
    mha_case, mha_inputs = converted
    family = check.family
    gqa, mha = check.run(), check.run(case=mha_case, inputs=mha_inputs)
    sizes = problem_sizes(family, check.inputs)
    group = sizes["head"] // sizes["kv_head"]
    folded = {}
    for name, value in mha.items():
        if name not in family.output_axes:
            continue
        roles = roles_of(family, name)
        if "kv_head" in roles and np.size(value):
            axis = roles.index("kv_head")
            shape = np.shape(value)
            value = np.asarray(value, np.float64).reshape(
                shape[:axis] + (shape[axis] // group, group) + shape[axis + 1:]
            ).sum(axis=axis + 1)
        folded[name] = value
    check.notes.append(f"MHA case: {mha_case!r}")
    check.expect_same(gqa, folded, may_change=None, factor=2.0,
                      what="repeating kv heads (summing their gradients) is the same problem")


SPECS: tuple[Spec, ...] = (
    Spec("invisible-inputs-ignored", _invisible_inputs_ignored, "visible", 0.1,
         "Perturbing keys/values a query cannot see (mask, causality, window, segments) "
         "leaves its output and dq unchanged; perturbing queries leaves dk/dv of keys no "
         "changed query sees unchanged."),
    Spec("segment-isolation", _segment_isolation, "segments", 0.1,
         "Perturbing every token of one segment changes no output of another segment.",
         applies=lambda hooks, case, _draw: hooks.segments(case) is not None,
         applies_what="has segment ids"),
    Spec("block-size-invariance", _block_size_invariance, "block_variants", 0.1,
         "Two valid block configurations agree within twice the tolerance."),
    Spec("deterministic", _deterministic, ANY_FAMILY, 0.07,
         "Rerunning forward and backward gives bitwise identical outputs."),
    Spec("schedule-invariance", _schedule_invariance, TPU_INTERPRETER, 0.1,
         "Under the TPU interpreter, the outputs are bitwise the same whether DMAs complete "
         "late and out of order or as issued, and whatever order the parallel grid "
         "dimensions run in (tpu-interpret backend only)."),
    Spec("finite-out", _finite_out, None, 0.1,
         "Finite inputs (logits scaled up to 32x; masked -inf logits allowed) give finite "
         "outputs and gradients, except where the contract says otherwise."),
    Spec("option-effect", _option_effect, "visible", 0.1,
         "Turning an option off changes rows whose visibility it changes (or some row, for "
         "value options like soft cap), and no other row.",
         applies=lambda hooks, case, _draw: bool(list(hooks.option_toggles(case))),
         applies_what="turns an option on"),
    Spec("gqa-equals-mha", _gqa_equals_mha, "as_mha", 0.07,
         "Grouped-query attention equals MHA with the kv heads repeated (dk/dv summed "
         "over each group).",
         applies=lambda hooks, case, _draw: hooks.as_mha(case, case.materialize()) is not None,
         applies_what="shares kv heads"),
)

#: Property name -> builder, merged into :data:`kernel_harness.checks.properties.PROPERTIES`.
PROPERTIES: dict[str, Callable[..., Callable[[], None]]] = {s.name: build(s) for s in SPECS}
