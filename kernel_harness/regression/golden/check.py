"""Recording and checking golden cases: the kernel on the stored inputs against the
stored reference (family tolerances), and the fresh reference against the stored one
(drift).

``check`` runs the kernel on the STORED inputs and compares it with the STORED
reference outputs under the family's tolerances. A golden recorded on another jax
version is compared too (the regression a user cares about across an upgrade) and
the outcome says the versions differ; there the stored reference is held to the
family tolerances instead of the drift-level ``REFERENCE_DRIFT_TOL``, which is bound
to one version. One recorded on another backend or device (every shipped golden is
recorded on ``interpret``; the nightly checks them on a TPU) is checked there too: the
kernel against the reference recomputed on that backend, the drift of that reference
from the stored one beside it (:func:`check_golden`). Only a family that cannot run on
the backend is skipped, and a check in which nothing was compared is not a pass
(:func:`compared_nothing`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.core.compare import compare
from kernel_harness.core.tolerance import Verdict, judge
from kernel_harness.records.family import Family
from kernel_harness.records.outputs import judged_outputs
from kernel_harness.regression.golden.store import (
    CROSS_DEVICE_DRIFT_TOL,
    MANIFEST,
    REFERENCE_DRIFT_TOL,
    GoldenCase,
    GoldenError,
    arrays_sha256,
    environment,
    family_dir,
    load_golden,
    load_manifest,
    not_comparable_reason,
    paths,
    same_device,
    save_manifest,
    select,
    version_difference,
    writable_root,
    write_golden,
)
from kernel_harness.run.crash import crash_kind, origin, own_frames
from kernel_harness.run.runner import (
    MAGNITUDE_SUFFIX,
    ensure_supported,
    impl_name,
    judge_outputs,
    low_precision_outputs,
    nonfinite_reference,
    run_on_backend,
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class GoldenOutcome:
    """What recording or checking one golden case gave.

    ``status`` is ``PASS``, ``FAIL`` (kernel or reference outside tolerance),
    ``SKIP`` (not comparable here; ``detail`` says why), ``ERROR`` (missing or
    corrupt file, crash) or ``RECORDED`` / ``KEPT`` for ``record``.
    """

    family: str
    name: str
    status: str
    detail: str = ""
    kernel: tuple[Verdict, ...] = ()
    drift: tuple[Verdict, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status in ("PASS", "SKIP", "RECORDED", "KEPT")


def _max_rel(verdicts: Sequence[Verdict]) -> dict[str, float]:
    return {v.stats.output: float(v.stats.max_rel_err) for v in verdicts}


def record_case(
    family: Family, gcase: GoldenCase, backend: Backend, *,
    impl: Callable[..., Any] | None = None, root: Path | None = None, force: bool = False,
) -> GoldenOutcome:
    """Records one golden case: inputs, reference outputs and metadata.

    Existing files are kept unless ``force``. The kernel runs too and must pass
    (a golden of a failing kernel would pin the wrong thing).
    """
    npz_path, json_path = paths(family.name, gcase.name, root)
    if not force and npz_path.exists() and json_path.exists():
        return GoldenOutcome(family=family.name, name=gcase.name, status="KEPT",
                             detail="exists (use --force to regenerate)")
    impl = family.kernel if impl is None else impl
    inputs = gcase.case.materialize()
    reference = {k: np.asarray(v) for k, v in family.reference(gcase.case, inputs).items()}
    bad_ref = nonfinite_reference(family, gcase.case, reference)
    if bad_ref:
        return GoldenOutcome(family=family.name, name=gcase.name, status="ERROR",
                             detail=f"not recorded: non-finite reference ({bad_ref})")
    actual = run_on_backend(family, impl, gcase.case, inputs, backend)
    verdicts, _ = judge_outputs(
        family, gcase.case, actual, reference,
        low_precision=low_precision_outputs(family, gcase.case, inputs, backend))
    if not all(v.passed for v in verdicts):
        bad = ", ".join(f"{v.stats.output}: {'; '.join(v.problems)}" for v in verdicts
                        if not v.passed)
        return GoldenOutcome(family=family.name, name=gcase.name, status="ERROR",
                             detail=f"not recorded: the kernel fails this case ({bad})",
                             kernel=verdicts)
    reference = {k: v for k, v in reference.items() if k in family.output_axes}
    write_golden(family, gcase, inputs, reference, backend=backend,
                 kernel_stats=_max_rel(verdicts), impl=impl_name(impl), root=root)
    return GoldenOutcome(family=family.name, name=gcase.name, status="RECORDED",
                         detail=f"{npz_path} ({npz_path.stat().st_size // 1024} KiB)",
                         kernel=verdicts)


def check_golden(
    family: Family, gcase: GoldenCase, backend: Backend, *,
    impl: Callable[..., Any] | None = None, root: Path | None = None,
) -> GoldenOutcome:
    """Checks one golden case on ``backend``: the kernel on the stored inputs, and the
    reference recomputed here against the stored one (drift).

    Recorded on this backend and device, the kernel is judged against the STORED
    reference. Recorded elsewhere (``interpret`` on CPU, checked on ``tpu``, ``gpu`` or
    ``tpu-interpret``), the stored numbers are not those this backend gives, so the kernel
    is judged against the reference recomputed HERE, with the family's tolerances (and its
    calibrated yardstick computed here), and the drift of that reference from the stored
    one is held to a bound that fits the two: :data:`REFERENCE_DRIFT_TOL` where the
    reference ran on the same platform and device kind, :data:`CROSS_DEVICE_DRIFT_TOL`
    where not, the family's tolerance where the jax version differs (the looser, where
    both)."""
    base = {"family": family.name, "name": gcase.name}
    try:
        stored = load_golden(family, gcase, root)
    except GoldenError as e:
        return GoldenOutcome(**base, status="ERROR", detail=str(e))
    notes = []
    recorded, here = stored.meta["environment"], environment(backend)
    elsewhere = not_comparable_reason(recorded, here) is not None
    cross_device = not same_device(recorded, here)
    versions = version_difference(recorded, here)
    bound = CROSS_DEVICE_DRIFT_TOL if cross_device else REFERENCE_DRIFT_TOL
    if elsewhere:
        where = ", ".join(f"{k}={recorded.get(k)}" for k in ("backend", "device_kind"))
        notes.append(f"recorded on {where}: kernel judged against the reference recomputed "
                     f"on {backend.name}; reference drift bound {bound.max_rel_err:g}"
                     + (" or the family tolerance, the looser" if versions else ""))
    if versions is not None:
        notes.append(f"{versions}: kernel judged by the family tolerances, reference drift "
                     "too (the 1e-5 drift bound holds on one version only)")
    if arrays_sha256(gcase.case.materialize()) != stored.meta["sha256"]["inputs"]:
        notes.append("case.materialize() no longer gives the stored inputs; stored ones used")
    impl = family.kernel if impl is None else impl
    case = gcase.case
    actual = run_on_backend(family, impl, case, stored.inputs, backend)
    fresh = family.reference(case, stored.inputs)
    # Scales a reference supplies beside its outputs (``<output>:magnitude``) come from the
    # fresh run: they are measuring aids, not stored results.
    scales = {k: v for k, v in fresh.items() if k.endswith(MAGNITUDE_SUFFIX)}
    # The yardstick of the calibrated judge is computed fresh too.
    expected = fresh if elsewhere else {**stored.reference, **scales}
    kernel, _ = judge_outputs(
        family, case, actual, expected,
        low_precision=low_precision_outputs(family, case, stored.inputs, backend))

    def drift_tol(o: str) -> Any:
        bounds = [bound]
        if versions is not None:
            bounds.append(family.tolerances.lookup(case.dtype, o))
        # The drift of one reference against another is judged by the slice bounds: an
        # element bound is about the kernel's rounding in its dtype.
        return dataclasses.replace(max(bounds, key=lambda t: t.max_rel_err), per_element=None)

    drift = tuple(
        judge(compare(fresh[o.name], stored.reference[o.name], output=o.name, axes=o.axes,
                      valid=o.valid, mismatch_threshold_rel=drift_tol(o.name).max_rel_err),
              drift_tol(o.name), nonfinite_reference_ok=o.nonfinite_reference_ok)
        for o in judged_outputs(family, case, same_as=False, compared_only=False)
    )
    problems = [f"kernel {v.stats.output}: {'; '.join(v.problems)}" for v in kernel
                if not v.passed]
    problems += [f"reference drift {v.stats.output}: {'; '.join(v.problems)}" for v in drift
                 if not v.passed]
    return GoldenOutcome(**base, status="FAIL" if problems else "PASS",
                         detail="; ".join(problems), kernel=kernel, drift=drift,
                         notes=tuple(notes))


def compared_nothing(outcomes: Sequence[GoldenOutcome]) -> str | None:
    """Why a ``check`` that compared no golden is not a pass (``None`` if one was compared):
    a nightly run after an upgrade that skips everything checks nothing."""
    if any(o.status in ("PASS", "FAIL") for o in outcomes):
        return None
    skipped = sorted({o.detail for o in outcomes if o.status == "SKIP"})
    if not outcomes:
        return "no golden case was selected"
    return "no golden was compared" + (f": {'; '.join(skipped)}" if skipped else "")


def orphans(family: Family, cases: Sequence[GoldenCase], root: Path | None = None) -> list[Path]:
    """Golden files in the family's folder that no manifest case names."""
    d = family_dir(family.name, root)
    if not d.is_dir():
        return []
    known = {f"{c.name}{ext}" for c in cases for ext in (".npz", ".json")}
    known |= {MANIFEST, "baseline.json"}
    return sorted(p for p in d.iterdir() if p.is_file() and p.name not in known)


def guarded(family: Family, gcase: GoldenCase, fn: Callable[[], GoldenOutcome]) -> GoldenOutcome:
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - a crash is reported per case, not hidden
        # The crash report's first line and the kernel's own frames (run.crash), not the
        # whole message of a jax runtime error.
        found = origin(e)
        frames = "".join(f"\n    {f.filename}:{f.lineno} in {f.name}" for f in own_frames(e))
        return GoldenOutcome(family=family.name, name=gcase.name, status="ERROR",
                             detail=f"CRASH ({crash_kind(e)}) {found.type_name}: "
                                    f"{found.message[:300]}{frames}")


def run_family(
    family: Family, backend: Backend, *, mode: str, names: Sequence[str] = (),
    tags: Sequence[str] = (), impl: Callable[..., Any] | None = None,
    root: Path | None = None, force: bool = False,
) -> list[GoldenOutcome]:
    """``mode="record"`` or ``"check"`` over a family's selected golden cases.

    A missing manifest, a failing case and a stray file (``check`` only) are
    ERROR outcomes; a family that cannot run on ``backend`` is one SKIP.
    """
    if mode not in ("record", "check"):
        raise ValueError(f"mode must be 'record' or 'check', got {mode!r}")
    try:
        ensure_supported(family, backend)
    except Exception as e:  # noqa: BLE001 - BackendUnavailable, reported as a skip
        return [GoldenOutcome(family=family.name, name="*", status="SKIP", detail=str(e))]
    try:
        if mode == "record":
            writable_root(family.name, root)
        cases = load_manifest(family, root)
        chosen = select(cases, names=names, tags=tags)
    except GoldenError as e:
        return [GoldenOutcome(family=family.name, name="*", status="ERROR", detail=str(e))]
    outcomes = []
    for gcase in chosen:
        if mode == "record":
            outcomes.append(guarded(family, gcase, lambda g=gcase: record_case(
                family, g, backend, impl=impl, root=root, force=force)))
        else:
            outcomes.append(guarded(family, gcase, lambda g=gcase: check_golden(
                family, g, backend, impl=impl, root=root)))
    if mode == "check" and not names and not tags:
        outcomes += [
            GoldenOutcome(family=family.name, name=p.name, status="ERROR",
                          detail=f"stray file {p}: no manifest case names it")
            for p in orphans(family, cases, root)
        ]
    return outcomes


def summary_rows(outcomes: Sequence[GoldenOutcome]) -> list[list[str]]:
    """Rows for ``report.format_table``: family, case, status, worst kernel error, detail."""
    rows = []
    for o in outcomes:
        worst = max(o.kernel, key=lambda v: v.stats.max_rel_err / v.tolerance.max_rel_err,
                    default=None)
        kernel = (f"{worst.stats.output} {worst.stats.max_rel_err:.2g}/"
                  f"{worst.tolerance.max_rel_err:.2g}" if worst else "-")
        drift = f"{max(v.stats.max_rel_err for v in o.drift):.1g}" if o.drift else "-"
        detail = "; ".join(filter(None, [o.detail, *o.notes]))
        rows.append([o.family, o.name, o.status, kernel, drift, detail])
    return rows


SUMMARY_HEADERS = ["family", "case", "status", "kernel err/tol (worst)", "ref drift", "detail"]


def add_case(family: Family, gcase: GoldenCase, backend: Backend, *,
             root: Path | None = None) -> GoldenOutcome:
    """Adds ``gcase`` to ``family``'s manifest and records its golden files on ``backend``
    (``golden add`` and ``corpus promote``). The manifest changes only when the recording
    succeeded (``outcome.ok``); a name the manifest already has is a ValueError."""
    try:
        cases = load_manifest(family, root)
    except GoldenError:
        if (family_dir(family.name, root) / MANIFEST).exists():
            raise
        cases = []
    if any(c.name == gcase.name for c in cases):
        raise ValueError(f"{family.name} already has a golden case {gcase.name!r}")
    outcome = guarded(family, gcase,
                      lambda: record_case(family, gcase, backend, root=root, force=True))
    if outcome.ok:
        save_manifest(family, [*cases, gcase], root)
    return outcome
