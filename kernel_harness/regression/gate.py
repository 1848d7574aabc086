"""The accuracy-regression gate: a kernel change may not make any named case less accurate.

``kernel-harness gate --record`` runs the family's golden cases (the manifest in
``golden/<family>/cases.json``) and stores each output's error against the
reference (``max_rel_err``) in ``golden/<family>/baseline.json``, one section per
backend and jax version (schema 2; schema-1 files, one section per backend, are
read too). ``kernel-harness gate`` reruns them and fails when an output's error
grew beyond ``factor x max(before, floor)``, even while still inside tolerance,
or when it is now outside tolerance; it prints a before/after table. It is the
command a kernel author runs before merging.

Across a jax upgrade the gate compares with the section of the nearest other jax
version (:func:`baseline_sections`) and prints that table as a version-drift
warning; the verdict needs a baseline of this jax version.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kernel_harness.core.backends import Backend
from kernel_harness.records.family import Family
from kernel_harness.regression import golden
from kernel_harness.regression.golden import location
from kernel_harness.run.crash import Crash, KernelCrash
from kernel_harness.run.runner import check_case, ensure_supported, impl_name

SCHEMA_VERSION = 2
#: Schema 1 (``backends: {name: section}``) is still read, converted to schema 2.
READABLE_SCHEMAS = (1, 2)
DEFAULT_FACTOR = 2.0
#: Errors below this (relative to the output's scale) count as this much, so noise
#: around zero error (a few float32 ulps) cannot trip the gate.
DEFAULT_FLOOR = 1e-6


class GateError(Exception):
    """No usable baseline: missing, unreadable, for other cases, or not comparable."""


def default_path(family_name: str, root: Path | None = None) -> Path:
    """``<golden root>/<family>/baseline.json`` (the root: :mod:`.golden.location`)."""
    return golden.family_dir(family_name, root) / "baseline.json"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Row:
    """One (case, output) line of the before/after table."""

    case: str
    output: str
    before: float | None
    after: float
    tolerance: float
    limit: float | None
    verdict: str  # ok, better, WORSE, FAIL (outside tolerance), NEW (no baseline)

    @property
    def failed(self) -> bool:
        return self.verdict in ("WORSE", "FAIL", "NEW")


def measure(
    family: Family, backend: Backend, cases: Sequence[golden.GoldenCase],
    impl: Callable[..., Any] | None = None, impl_spec: str | None = None,
) -> dict[str, tuple[dict[str, float], dict[str, float], dict[str, bool]]]:
    """``{case name: (max_rel_err, tolerance, passed)}`` per output, kernel vs reference;
    a case the kernel crashes on raises :class:`KernelCrash` (the crash report)."""
    out = {}
    for g in cases:
        try:
            result = check_case(family, g.case, backend, impl)
        except Exception as e:  # noqa: BLE001 - a crash is reported as one (KernelCrash)
            raise KernelCrash(Crash(
                family=family.name, case=g.case, backend=backend,
                impl=impl_name(family.kernel if impl is None else impl, impl_spec),
                impl_spec=impl_spec,
                adjustments=family.adjustments, error=e,
                notes=(f"golden case: {g.name}",))) from e
        out[g.name] = (
            {v.stats.output: float(v.stats.max_rel_err) for v in result.verdicts},
            {v.stats.output: v.tolerance.max_rel_err for v in result.verdicts},
            {v.stats.output: v.passed for v in result.verdicts},
        )
    return out


def section_key(env: dict[str, str]) -> str:
    """The key of one baseline section: backend and jax version (``interpret jax 0.12.0.1``)."""
    return f"{env['backend']} jax {env['jax_version']}"


def _load(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise GateError(f"{path}: corrupt baseline: {e}") from None
    if data.get("schema_version") not in READABLE_SCHEMAS:
        raise GateError(f"{path}: schema_version {data.get('schema_version')!r}, "
                        f"expected one of {READABLE_SCHEMAS}; re-record with --record")
    if data["schema_version"] == 1:
        sections = data.get("backends", {}).values()
        data = {"schema_version": SCHEMA_VERSION, "family": data.get("family"),
                "sections": {section_key(s["environment"]): s for s in sections}}
    return data


def record(
    family: Family, backend: Backend, *, path: Path, impl: Callable[..., Any] | None = None,
    root: Path | None = None,
) -> dict[str, Any]:
    """Measures every golden case and writes this backend's and jax version's section of the
    baseline (other versions' sections are kept).

    Refuses (GateError) when the kernel fails any case: a baseline must be a
    passing kernel's errors.
    """
    ensure_supported(family, backend)
    where = location.resolve(family.name, root)
    if not where.writable and path.resolve().is_relative_to(where.path.resolve()):
        raise GateError(f"not writing {path}: the goldens installed with the "
                        f"package are never written; name your own --golden-dir DIR (or "
                        f"--baseline PATH)")
    cases = golden.load_manifest(family, root)
    measured = measure(family, backend, cases, impl)
    failing = [f"{n}/{o}" for n, (_, _, ok) in measured.items() for o, p in ok.items() if not p]
    if failing:
        raise GateError(f"{family.name}: not recording a baseline, the kernel fails {failing}")
    data = _load(path) or {"schema_version": SCHEMA_VERSION, "family": family.name,
                           "sections": {}}
    if data.get("family") != family.name:
        raise GateError(f"{path}: holds family {data.get('family')!r}, not {family.name!r}")
    env = golden.environment(backend)
    data["sections"][section_key(env)] = {
        "environment": env,
        "impl": impl_name(family.kernel if impl is None else impl),
        "cases": {
            g.name: {"case": json.loads(g.case.to_json()), "max_rel_err": measured[g.name][0]}
            for g in cases
        },
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return data


def baseline_sections(
    family: Family, backend: Backend, path: Path
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """``(this jax version's section, the nearest other jax version's section)`` for this
    backend and device (the nearest older version if any, else the nearest newer);
    a GateError if there is neither."""
    env = golden.environment(backend)
    sections = [s for s in _load(path).get("sections", {}).values()
                if golden.not_comparable_reason(s["environment"], env) is None]
    same = next((s for s in sections
                 if golden.version_difference(s["environment"], env) is None), None)
    now = golden.version_key(env["jax_version"])
    others = sorted((s for s in sections if s is not same),
                    key=lambda s: golden.version_key(s["environment"]["jax_version"]))
    older = [s for s in others if golden.version_key(s["environment"]["jax_version"]) <= now]
    other = older[-1] if older else (others[0] if others else None)
    if same is None and other is None:
        raise GateError(
            f"{path}: no {family.name} baseline for backend {backend.name} on "
            f"{env['device_kind']}; record one with "
            f"`kernel-harness gate {family.name} --record --backend {backend.name}`"
        )
    return same, other


def baseline_section(
    family: Family, backend: Backend, path: Path, *, across_versions: bool = False
) -> dict[str, Any]:
    """This backend's section recorded on this jax version (with ``across_versions``, the
    nearest other version's if this one has none); else a GateError saying what to record."""
    same, other = baseline_sections(family, backend, path)
    if same is not None:
        return same
    if across_versions:
        return other
    raise GateError(
        f"{path}: no {family.name} baseline recorded on jax "
        f"{golden.environment(backend)['jax_version']} for backend {backend.name} (there is one "
        f"for jax {other['environment']['jax_version']}); record one with "
        f"`kernel-harness gate {family.name} --record --backend {backend.name}`"
    )


def evaluate(
    before: dict[str, Any], after: dict[str, tuple[dict[str, float], dict[str, float],
                                                   dict[str, bool]]],
    cases: Sequence[golden.GoldenCase], *, factor: float = DEFAULT_FACTOR,
    floor: float = DEFAULT_FLOOR,
) -> list[Row]:
    """Judges each (case, output): worse than ``factor x max(before, floor)`` fails."""
    rows = []
    for g in cases:
        errs, tols, passed = after[g.name]
        recorded = before.get(g.name)
        if recorded is not None:
            try:
                same = golden.same_case(recorded["case"], g.case)
            except (ValueError, TypeError) as e:
                raise GateError(f"baseline case {g.name!r}: its stored case does not load ({e}); "
                                f"re-record with --record") from None
            if not same:
                raise GateError(f"baseline case {g.name!r} was recorded for a different case "
                                f"description; re-record with --record")
        for out, err in errs.items():
            prior = None if recorded is None else recorded["max_rel_err"].get(out)
            limit = None if prior is None else factor * max(prior, floor)
            if not passed[out]:
                verdict = "FAIL"
            elif limit is None:
                verdict = "NEW"
            elif not err <= limit:
                verdict = "WORSE"
            elif prior > floor and err * factor < prior:
                verdict = "better"
            else:
                verdict = "ok"
            rows.append(Row(case=g.name, output=out, before=prior, after=err, tolerance=tols[out],
                            limit=limit, verdict=verdict))
    return rows


def table(rows: Sequence[Row]) -> str:
    """The before/after table."""
    from kernel_harness.run.report import format_table

    def f(x: float | None) -> str:
        return "-" if x is None else ("inf" if math.isinf(x) else f"{x:.3g}")

    return format_table(
        ["case", "output", "before", "after", "after/before", "limit", "tolerance", "verdict"],
        [[r.case, r.output, f(r.before), f(r.after),
          "-" if not r.before else f"{r.after / r.before:.2f}x", f(r.limit), f(r.tolerance),
          r.verdict] for r in rows],
    )
