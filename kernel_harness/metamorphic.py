"""Metamorphic properties: relations between kernel runs that need no reference.

Equality with a reference misses bugs the reference shares. These properties
compare the kernel with itself: perturb inputs a query must not see, change
block sizes, rerun, drop an option, regroup heads, and check what must (not)
change. A family opts in with a :class:`Metamorphic` of hooks
(``Family.metamorphic``); a property whose hook is missing is not applicable
(:class:`PropertyNotApplicable`), never a pass.

Canonical axis roles (``Metamorphic.roles``): ``batch``, ``head`` (query
heads), ``kv_head``, ``query`` (query positions), ``key`` (key/value
positions); any other name (``dim``) is ignored. Query head ``h`` uses kv head
``h // (heads // kv_heads)``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import hypothesis
import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from kernel_harness.backends import Backend
from kernel_harness.case import standard_normal
from kernel_harness.diagnostics import TpuInterpretCannotRun, note_cannot_run
from kernel_harness.family import Arrays, Family
from kernel_harness.runner import ensure_supported, run_on_backend

ROLES: tuple[str, ...] = ("batch", "head", "kv_head", "query", "key")
ROW_ROLES = ("batch", "head", "query")
KEY_ROLES = ("batch", "kv_head", "key")
KEY_ROLES_BY_QHEAD = ("batch", "head", "key")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Toggle:
    """An option turned off: ``case`` is the same case without it.

    ``changes``: ``visibility`` when the option changes which keys a query sees
    (causal, window, segments: rows whose visibility differs must change, the
    others must not), ``values`` when it changes logits (soft cap: some valid
    row must change).
    """

    name: str
    case: Any
    changes: str = "visibility"

    def __post_init__(self) -> None:
        if self.changes not in ("visibility", "values"):
            raise ValueError(f"Toggle.changes must be visibility or values, got {self.changes!r}")


def _no_toggles(case: Any) -> Sequence[Toggle]:
    return ()


def _no_exclusions(case: Any) -> Mapping[str, np.ndarray]:
    return {}


def _unchanged(case: Any, inputs: Arrays) -> Arrays:
    return inputs


@dataclasses.dataclass(frozen=True, kw_only=True)
class Metamorphic:
    """A family's hooks for the metamorphic properties (all built from the case
    description, never from the kernel's own mask objects).

    Attributes:
      roles: axis roles of every input and output array the properties touch
        (outputs default to ``Family.output_axes``), e.g.
        ``{"q": ("batch", "head", "query", "dim"), "k": ("batch", "kv_head", "key", "dim")}``.
        Floating inputs with a ``query`` axis (q, do) are query-side, those
        with a ``key`` axis (k, v) key-side; others are never perturbed.
      visible: ``visible(case)`` -> bool ``[batch, head, query, key]`` (size-1
        axes broadcast): which keys each query sees (mask, window, segments).
      segments: ``segments(case)`` -> ``(q_ids [batch|1, q], kv_ids [batch|1, kv])``
        or None when the case has no segments; no hook: the family has no segments.
      block_variants: ``block_variants(case)`` -> strategy of cases differing
        from ``case`` only in block sizes (same inputs).
      option_toggles: ``option_toggles(case)`` -> :class:`Toggle` s, one per
        option the case turns on.
      as_mha: ``as_mha(case, inputs)`` -> ``(case, inputs)`` of the same problem
        with kv heads repeated to one per query head, or None if not grouped.
      logit_input: the input whose scaling scales the logits (finite-out).
      may_be_nonfinite: ``{output: bool mask}`` of elements the family's
        contract lets be non-finite (e.g. lse of a row that sees no key).
      constrain: re-imposes input invariants of the contract after a
        perturbation (e.g. a zero cotangent on rows that see no key).
      traceable: ``traceable(impl, case, backend)`` -> a jax-traceable function
        ``f(inputs) -> outputs`` (dicts of arrays, forward and gradients), for
        TPU lowering and sharded runs; ``impl`` None means the family kernel.
      local_case: ``local_case(case, {"batch": nb, "head": nh})`` -> the case one
        shard computes when batch and heads (query and kv heads alike) are split
        into ``nb`` and ``nh`` contiguous parts, or None if that split is not
        supported; see :mod:`kernel_harness.sharding`.
    """

    roles: Mapping[str, tuple[str | None, ...]]
    visible: Callable[[Any], np.ndarray]
    segments: Callable[[Any], tuple[np.ndarray, np.ndarray] | None] | None = None
    block_variants: Callable[[Any], SearchStrategy[Any]] | None = None
    option_toggles: Callable[[Any], Sequence[Toggle]] = _no_toggles
    as_mha: Callable[[Any, Arrays], tuple[Any, Arrays] | None] | None = None
    logit_input: str = "q"
    may_be_nonfinite: Callable[[Any], Mapping[str, np.ndarray]] = _no_exclusions
    constrain: Callable[[Any, Arrays], Arrays] = _unchanged
    traceable: Callable[[Any, Any, Backend], Callable[[Arrays], Arrays]] | None = None
    local_case: Callable[[Any, Mapping[str, int]], Any] | None = None


class PropertyNotApplicable(Exception):
    """The property needs a hook the family does not provide (reported as SKIP, never PASS)."""


class MetamorphicFailure(AssertionError):
    """A metamorphic relation between kernel runs does not hold; the message says where."""


# --- array bookkeeping --------------------------------------------------------------------------


def roles_of(family: Family, name: str) -> tuple[str | None, ...]:
    """The axis roles of input or output ``name``."""
    hooks = family.metamorphic
    if hooks is not None and name in hooks.roles:
        return tuple(hooks.roles[name])
    if name in family.output_axes:
        return tuple(family.output_axes[name])
    raise KeyError(f"{family.name}: no axis roles for {name!r}")


def problem_sizes(family: Family, inputs: Arrays) -> dict[str, int]:
    """Sizes of the canonical roles read off the inputs (absent roles are 1)."""
    sizes: dict[str, int] = {}
    for name, array in inputs.items():
        if family.metamorphic is None or name not in family.metamorphic.roles:
            continue
        roles = roles_of(family, name)
        if len(roles) != np.ndim(array):
            raise ValueError(f"{family.name}: roles of {name!r} {roles} vs shape {array.shape}")
        for role, size in zip(roles, np.shape(array), strict=True):
            if role not in ROLES:
                continue
            known = sizes.setdefault(role, size)
            if known != size and min(known, size) != 1:  # size 1 broadcasts
                raise ValueError(
                    f"{family.name}: axis {role!r} is {known} in one input, {size} in {name!r}"
                )
            sizes[role] = max(known, size)
    sizes.setdefault("head", 1)
    sizes.setdefault("kv_head", sizes["head"])
    for role in ("batch", "query", "key"):
        sizes.setdefault(role, 1)
    if sizes["head"] % sizes["kv_head"]:
        raise ValueError(f"{family.name}: {sizes['kv_head']} kv heads do not divide "
                         f"{sizes['head']} heads")
    return sizes


def project(mask: np.ndarray, mask_roles: Sequence[str], roles: Sequence[str | None],
            shape: tuple[int, ...]) -> np.ndarray:
    """``mask`` (axes ``mask_roles``) laid out for an array with axis ``roles`` and ``shape``:
    missing roles broadcast, roles the array lacks are reduced with ``any``."""
    keep = [r for r in mask_roles if r in roles]
    drop = tuple(i for i, r in enumerate(mask_roles) if r not in roles)
    m = mask.any(axis=drop) if drop else mask
    m = np.transpose(m, [keep.index(r) for r in roles if r in keep]) if keep else m
    order = [r for r in roles if r in keep]
    expanded = m.reshape([m.shape[order.index(r)] if r in keep else 1 for r in roles])
    # A size-1 (broadcast) axis of the target holds every index of the mask's axis.
    squash = tuple(i for i, (a, b) in enumerate(zip(expanded.shape, shape, strict=True))
                   if a != b and b == 1)
    if squash:
        expanded = expanded.any(axis=squash, keepdims=True)
    return np.broadcast_to(expanded, shape)


def visibility(family: Family, case: Any, sizes: Mapping[str, int]) -> np.ndarray:
    """The hook's visibility broadcast to ``[batch, head, query, key]``."""
    vis = np.asarray(family.metamorphic.visible(case), bool)
    full = (sizes["batch"], sizes["head"], sizes["query"], sizes["key"])
    try:
        return np.broadcast_to(vis, full)
    except ValueError:
        raise ValueError(f"{family.name}: visible(case) has shape {vis.shape}, "
                         f"not broadcastable to [batch, head, query, key] {full}") from None


@dataclasses.dataclass(frozen=True)
class Influence:
    """Which output elements a perturbation may change: ``rows`` [batch, head, query],
    ``keys`` [batch, kv_head, key] and ``keys_by_head`` [batch, head, key]."""

    rows: np.ndarray
    keys: np.ndarray
    keys_by_head: np.ndarray

    def may_change(self, roles: Sequence[str | None], shape: tuple[int, ...]) -> np.ndarray:
        """Bool mask (broadcast to ``shape``) of an output's elements that may change
        (an output indexed by query and key, like a bias gradient, may change where
        its row or its key may)."""
        if "query" in roles and "key" in roles:
            by_row = project(self.rows, ROW_ROLES, roles, shape)
            no_query = tuple(r if r != "query" else None for r in roles)
            return by_row | self.may_change(no_query, shape)
        if "key" in roles or "kv_head" in roles:
            if "kv_head" in roles or "head" not in roles:
                return project(self.keys, KEY_ROLES, roles, shape)
            return project(self.keys_by_head, KEY_ROLES_BY_QHEAD, roles, shape)
        return project(self.rows, ROW_ROLES, roles, shape)


def influence(vis: np.ndarray, key_pert: np.ndarray, query_pert: np.ndarray,
              kv_heads: int) -> Influence:
    """What perturbing key positions ``key_pert`` [batch, key] and query positions
    ``query_pert`` [batch, query] may change, given visibility ``vis``.

    A row changes if it is perturbed or sees a perturbed key; a key's gradient
    changes if the key is perturbed or some changed row sees it.
    """
    b, h, q, k = vis.shape
    rows = query_pert[:, None, :] | (vis & key_pert[:, None, None, :]).any(axis=-1)
    by_head = (vis & rows[..., None]).any(axis=2) | key_pert[:, None, :]
    keys = by_head.reshape(b, kv_heads, h // kv_heads, k).any(axis=2)
    return Influence(rows=rows, keys=keys, keys_by_head=by_head)


def perturb(family: Family, case: Any, inputs: Arrays, *, key_pert: np.ndarray,
            query_pert: np.ndarray, stream: int) -> Arrays:
    """Fresh standard-normal values at the perturbed positions of every floating
    query-side and key-side input (all heads), then the hook's ``constrain``."""
    rng = case.rng(1000 + stream)
    out = dict(inputs)
    for name, array in inputs.items():
        if name not in family.metamorphic.roles or not _is_float(array):
            continue
        roles = roles_of(family, name)
        if ("query" in roles) == ("key" in roles):
            continue
        pert, pert_roles = (query_pert, ("batch", "query")) if "query" in roles else (
            key_pert, ("batch", "key"))
        where = project(pert, pert_roles, roles, array.shape)
        fresh = standard_normal(rng, array.shape, str(array.dtype))
        out[name] = np.where(where, fresh, array).astype(array.dtype)
    return family.metamorphic.constrain(case, out)


def _is_float(array: np.ndarray) -> bool:
    return np.issubdtype(array.dtype, np.floating) or array.dtype.name == "bfloat16"


def _location(axes: Sequence[str], index: tuple[int, ...]) -> str:
    return " ".join(f"{a}={i}" for a, i in zip(axes, index, strict=False))


def differences(a: np.ndarray, b: np.ndarray, where: np.ndarray | None, threshold_rel: float
                ) -> tuple[int, float, tuple[int, ...] | None, float]:
    """Elements (within ``where``) whose values differ by more than ``threshold_rel``
    times ``a``'s scale: ``(count, largest difference / scale, worst index, scale)``.
    A NaN/Inf in one run only is an infinite difference."""
    a64 = np.asarray(a, np.float64)
    b64 = np.asarray(b, np.float64)
    finite = np.isfinite(a64)
    scale = max(float(np.max(np.abs(a64[finite]))) if finite.any() else 0.0, 1e-30)
    diff = np.abs(a64 - b64)
    same_nonfinite = (~np.isfinite(a64)) & (~np.isfinite(b64)) & (
        np.isnan(a64) == np.isnan(b64)) & ((a64 == b64) | np.isnan(a64))
    diff = np.where(same_nonfinite, 0.0, np.where(np.isnan(diff), np.inf, diff))
    if where is not None:
        diff = np.where(np.broadcast_to(where, diff.shape), diff, 0.0)
    if diff.size == 0:
        return 0, 0.0, None, scale
    worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape))
    count = int(np.count_nonzero(diff > threshold_rel * scale))
    return count, float(diff[worst]) / scale, worst, scale


# --- running ------------------------------------------------------------------------------------


@dataclasses.dataclass
class Check:
    """One example of one metamorphic property: runs the kernel, collects problems."""

    family: Family
    prop: str
    case: Any
    backend: Backend
    impl: Callable[..., Any]
    impl_spec: str | None
    inputs: Arrays
    problems: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    runs: int = 0

    @property
    def hooks(self) -> Metamorphic:
        return self.family.metamorphic

    def run(self, case: Any = None, inputs: Arrays | None = None) -> Arrays:
        self.runs += 1
        case = self.case if case is None else case
        inputs = self.inputs if inputs is None else inputs
        outputs = run_on_backend(self.family, self.impl, case, inputs, self.backend)
        return {k: np.asarray(v) for k, v in outputs.items()}

    def tolerance(self, output: str, factor: float = 1.0) -> float:
        return factor * self.family.tolerances.lookup(self.case.dtype, output).max_rel_err

    def valid(self, output: str, shape: tuple[int, ...], case: Any = None) -> np.ndarray:
        mask = self.family.valid(self.case if case is None else case).get(output)
        return np.ones(shape, bool) if mask is None else np.broadcast_to(mask, shape)

    def expect_same(self, a: Arrays, b: Arrays, *, may_change: Callable[[str, tuple], np.ndarray]
                    | None, factor: float, what: str, outputs: Sequence[str] | None = None
                    ) -> int:
        """Records a problem for every output that differs beyond ``factor`` x its
        tolerance where it must not; returns how many elements were checked."""
        checked = 0
        for name in outputs or self.family.output_axes:
            if name not in a or np.size(a[name]) == 0:
                continue
            shape = np.shape(a[name])
            where = self.valid(name, shape)
            if may_change is not None:
                where = where & ~may_change(name, shape)
            checked += int(where.sum())
            tol = self.tolerance(name, factor)
            count, rel, worst, _ = differences(a[name], b[name], where, tol)
            if count:
                axes = self.family.output_axes[name]
                self.problems.append(
                    f"{name}: {count} element(s) changed that must not ({what}); largest change "
                    f"{rel:.3g} x scale (tolerance {self.tolerance(name, factor):.3g}) at "
                    f"{_location(axes, worst)}: {float(a[name][worst]):.6g} -> "
                    f"{float(b[name][worst]):.6g}"
                )
        return checked

    def fail_if_problems(self) -> None:
        if not self.problems:
            return
        shape = getattr(self.case, "shape_summary", None)
        where = " ".join(filter(None, [self.case.dtype, shape() if callable(shape) else ""]))
        lines = [
            f"[kernel-harness] FAIL {self.family.name} {self.prop} {where} "
            f"backend={self.backend.name}: {self.problems[0]}",
            *(f"  {p}" for p in self.problems[1:]),
            *(f"  note: {n}" for n in self.notes),
            f"  impl: {self.impl_spec or getattr(self.impl, '__qualname__', self.impl)}",
            f"  case: {self.case!r}",
            f"  case json: {self.case.to_json()}",
            f"  rerun: kernel-harness check {self.family.name} --property {self.prop} "
            f"--backend {self.backend.name}" + (f" --impl {self.impl_spec}" if self.impl_spec
                                                else ""),
        ]
        raise MetamorphicFailure("\n".join(lines))


Body = Callable[[Check, st.DataObject], None]


@dataclasses.dataclass(frozen=True)
class Spec:
    """A metamorphic property: its body, the hook it needs, and its example fraction."""

    name: str
    body: Body
    needs: str | None
    fraction: float
    doc: str


#: Fewest examples a capped metamorphic property runs.
MIN_EXAMPLES = 2


def example_cap(prop: Callable[..., Any], max_examples: int) -> int:
    """A property's example count under a profile's ``max_examples``: scaled down by
    its ``kh_example_fraction`` (1.0 for properties without one), at least
    :data:`MIN_EXAMPLES`."""
    fraction = getattr(prop, "kh_example_fraction", 1.0)
    if fraction >= 1.0:
        return max_examples
    return max(MIN_EXAMPLES, min(max_examples, round(max_examples * fraction)))


def _applicable(family: Family, spec: Spec) -> Metamorphic:
    hooks = family.metamorphic
    if hooks is None:
        raise PropertyNotApplicable(
            f"{family.name} declares no metamorphic hooks (Family.metamorphic is None)"
        )
    if spec.needs is not None and getattr(hooks, spec.needs) is None:
        raise PropertyNotApplicable(f"{family.name} has no {spec.needs!r} hook for {spec.name}")
    return hooks


def build(spec: Spec) -> Callable[..., Callable[[], None]]:
    """The property builder for ``spec`` (same signature as ``matches_reference``)."""

    def builder(family: Family, *, backend: Backend, impl: Callable[..., Any] | None = None,
                impl_spec: str | None = None, observer: Any = None) -> Callable[[], None]:
        ensure_supported(family, backend)
        _applicable(family, spec)
        kernel = family.kernel if impl is None else impl

        @given(case=family.cases(), data=st.data())
        def prop(case: Any, data: st.DataObject) -> None:
            for label in family.events(case):
                hypothesis.event(label)
                if observer is not None:
                    observer.events[label] += 1
            start = time.perf_counter()
            check = Check(family=family, prop=spec.name, case=case, backend=backend,
                          impl=kernel, impl_spec=impl_spec, inputs=case.materialize())
            ok = False
            try:
                spec.body(check, data)
                check.fail_if_problems()
                ok = True
            except TpuInterpretCannotRun as e:
                note_cannot_run(e, observer)
            finally:
                # Like a crash in matches-reference, a failing example is not counted as
                # run: the CLI adds the failure itself.
                if observer is not None and ok:
                    observer.examples += 1
                    observer.passed += 1
                    observer.seconds += time.perf_counter() - start

        prop.__name__ = f"{family.name}_{spec.name.replace('-', '_')}"
        prop.__doc__ = spec.doc
        prop.kh_example_fraction = spec.fraction
        return prop

    builder.__name__ = spec.name.replace("-", "_")
    builder.__doc__ = spec.doc
    return builder


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
    checked = check.expect_same(
        base, moved, factor=1.0, what=f"they do not depend on the perturbed {side}",
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


def _deterministic(check: Check, data: st.DataObject) -> None:
    first, second = check.run(), check.run()
    for name in check.family.output_axes:
        a, b = first.get(name), second.get(name)
        if a is None or np.size(a) == 0:
            continue
        if not np.array_equal(a, b, equal_nan=True):
            count, rel, worst, _ = differences(a, b, None, 0.0)
            check.problems.append(
                f"{name}: rerunning changed {count} element(s) (bitwise); largest change "
                f"{rel:.3g} x scale at {_location(check.family.output_axes[name], worst)}"
            )


def _finite_out(check: Check, data: st.DataObject) -> None:
    factor = data.draw(st.sampled_from([1.0, 8.0, 32.0]), label="logit scale")
    inputs = dict(check.inputs)
    name = check.hooks.logit_input
    if factor != 1.0 and name in inputs:
        x = inputs[name]
        scaled = np.asarray(x, np.float32) * factor
        inputs[name] = scaled.astype(x.dtype)
        inputs = check.hooks.constrain(check.case, inputs)
    check.notes.append(f"logit input {name!r} scaled by {factor}")
    if not all(np.isfinite(np.asarray(v, np.float64)).all()
               for v in inputs.values() if _is_float(v)):
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
                f"{arr[first]} at {_location(check.family.output_axes[out_name], first)}"
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
        k: (check.inputs[k] if k in check.inputs and _is_float(v)
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
        differ = (before != after).any(axis=-1)
        inf = Influence(rows=differ, keys=np.zeros((1, 1, 1), bool),
                        keys_by_head=np.zeros((1, 1, 1), bool))
        may = lambda name, shape: inf.may_change(roles_of(family, name), shape)  # noqa: E731
        check.expect_same(with_opt, without, may_change=may, factor=2.0, outputs=rows_out,
                          what=f"turning off {toggle.name} leaves their visible keys as they were")
        if not differ.any():
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
    Spec("invisible-inputs-ignored", _invisible_inputs_ignored, None, 0.1,
         "Perturbing keys/values a query cannot see (mask, causality, window, segments) "
         "leaves its output and dq unchanged; perturbing queries leaves dk/dv of keys no "
         "changed query sees unchanged."),
    Spec("segment-isolation", _segment_isolation, "segments", 0.1,
         "Perturbing every token of one segment changes no output of another segment."),
    Spec("block-size-invariance", _block_size_invariance, "block_variants", 0.1,
         "Two valid block configurations agree within twice the tolerance."),
    Spec("deterministic", _deterministic, None, 0.07,
         "Rerunning forward and backward gives bitwise identical outputs."),
    Spec("finite-out", _finite_out, None, 0.1,
         "Finite inputs (logits scaled up to 32x) give finite outputs and gradients, "
         "except where the contract says otherwise."),
    Spec("option-effect", _option_effect, None, 0.1,
         "Turning an option off changes rows whose visibility it changes (or some row, for "
         "value options like soft cap), and no other row."),
    Spec("gqa-equals-mha", _gqa_equals_mha, "as_mha", 0.07,
         "Grouped-query attention equals MHA with the kv heads repeated (dk/dv summed "
         "over each group)."),
)

#: Property name -> builder, merged into :data:`kernel_harness.properties.PROPERTIES`.
PROPERTIES: dict[str, Callable[..., Callable[[], None]]] = {s.name: build(s) for s in SPECS}
