"""The machinery behind the metamorphic properties: axis-role bookkeeping,
visibility and influence of a perturbation, comparing two runs, and turning a
relation into a Hypothesis property (:func:`build`).

Equality with a reference misses bugs the reference shares. The properties compare the kernel
with itself: perturb inputs a query must not see, change block sizes, rerun, drop an option,
regroup heads, and check what must (not) change. A family opts in with hooks
(``Family.metamorphic``); a property whose hook is missing is not applicable
(:class:`~kernel_harness.core.errors.PropertyNotApplicable`), never a pass.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import hypothesis
import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.errors import StopTest, UnsatisfiedAssumption

from kernel_harness.checks.metamorphic.replay import Recorder, Replayer
from kernel_harness.core.backends import Backend
from kernel_harness.core.case import standard_normal
from kernel_harness.core.errors import PropertyNotApplicable
from kernel_harness.run.diagnostics import TpuInterpretCannotRun, note_cannot_run
from kernel_harness.run.report import case_repro_command
from kernel_harness.run.runner import ensure_supported, run_on_backend
from kernel_harness.spec.family import Arrays, Family
from kernel_harness.spec.hooks import (
    KEY_ROLES,
    KEY_ROLES_BY_QHEAD,
    ROLES,
    ROW_ROLES,
    Metamorphic,
)


class MetamorphicFailure(AssertionError):
    """A metamorphic relation between kernel runs does not hold; the message says where.

    ``case`` is the failing example's case and ``draws_json`` what it drew besides (the
    ``--draws`` of its repro line; None when the example cannot be replayed), so a
    failure corpus can store it without parsing the message."""

    def __init__(self, message: str, *, case: Any = None, draws_json: str | None = None):
        super().__init__(message)
        self.case = case
        self.draws_json = draws_json


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
        if name not in family.metamorphic.roles or not is_float(array):
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


def is_float(array: np.ndarray) -> bool:
    return np.issubdtype(array.dtype, np.floating) or array.dtype.name == "bfloat16"


def location(axes: Sequence[str], index: tuple[int, ...]) -> str:
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
    #: What the example drew besides its case (set by the property; None when replayed).
    recorder: Recorder | Replayer | None = None

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
                    f"{location(axes, worst)}: {float(a[name][worst]):.6g} -> "
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
            self.reproduce_line(),
        ]
        rec = self.recorder
        draws = None if rec is not None and rec.replayable is not None else (
            "[]" if rec is None else rec.to_json())
        raise MetamorphicFailure("\n".join(lines), case=self.case, draws_json=draws)

    def reproduce_line(self) -> str:
        """``  reproduce: kernel-harness repro FAMILY ... --property P --draws JSON``: this
        example exactly (its case and every value it drew), or why it cannot be."""
        rec = self.recorder
        if rec is not None and rec.replayable is not None:
            return f"  reproduce: not replayable ({rec.replayable})"
        draws = "[]" if rec is None else rec.to_json()
        command = case_repro_command(
            self.family.name, self.backend.name, self.case, self.impl_spec,
            (*self.family.adjustments, "--property", self.prop, "--draws", draws))
        return f"  reproduce: {command}"


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


def applicable(family: Family, spec: Spec) -> Metamorphic:
    """The family's hooks, or PropertyNotApplicable when ``spec`` needs one it lacks."""
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
        applicable(family, spec)
        kernel = family.kernel if impl is None else impl

        @given(case=family.cases(), data=st.data())
        def prop(case: Any, data: st.DataObject) -> None:
            start = time.perf_counter()
            check = Check(family=family, prop=spec.name, case=case, backend=backend,
                          impl=kernel, impl_spec=impl_spec, inputs=case.materialize(),
                          recorder=Recorder(data))
            ok = rejected = False
            try:
                spec.body(check, check.recorder)
                check.fail_if_problems()
                ok = True
            except TpuInterpretCannotRun as e:
                rejected = True
                note_cannot_run(e, observer)  # counts it as rejected
            except (UnsatisfiedAssumption, StopTest):
                # assume()/reject() in the relation, or a draw past Hypothesis's data
                # limit: Hypothesis discards the example; it neither passed nor failed.
                rejected = True
                if observer is not None:
                    observer.rejected += 1
                raise
            finally:
                # Events and counts describe examples that ran (failing ones included),
                # never a rejected one.
                if not rejected:
                    for label in family.events(case):
                        hypothesis.event(label)
                        if observer is not None:
                            observer.events[label] += 1
                if observer is not None and not rejected:
                    observer.record_check(case, time.perf_counter() - start)
                    observer.end_example(ok)

        prop.__name__ = f"{family.name}_{spec.name.replace('-', '_')}"
        prop.__doc__ = spec.doc
        prop.kh_example_fraction = spec.fraction
        return prop

    builder.__name__ = spec.name.replace("-", "_")
    builder.__doc__ = spec.doc
    return builder
