"""Machine-readable results of ``kernel-harness check``: ``--json PATH`` and ``--junit PATH``.

The JSON document follows ``kernel_harness/schemas/check-results-v1.json``
(``schema_version`` 1; a field is only ever added in a later version, never renamed).
The JUnit XML has one ``<testcase>`` per family x property (classname = family, name =
property), with ``<failure>`` (outputs outside tolerance), ``<error>`` (the kernel or the
harness raised) or ``<skipped>``. It is written with :mod:`xml.etree` rather than a
library: the format is a dozen elements, and a guest package should not add a runtime
dependency to its users' environments for that (``junitparser``, maintained, is in the
dev extras and parses the output in the tests).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import math
import platform
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

from kernel_harness.checks import flaky
from kernel_harness.checks.matches_reference import HarnessFailure
from kernel_harness.checks.properties import PropertyOutcome
from kernel_harness.core.backends import Backend
from kernel_harness.orchestration import outcome_text
from kernel_harness.run import report
from kernel_harness.run.runner import CaseResult

SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "check-results-v1.json"


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


#: jax settings that change the numbers a run computes, with jax's own defaults.
NUMERICS_CONFIG: dict[str, object] = {
    "jax_default_matmul_precision": None, "jax_enable_x64": False}


def jax_numerics() -> dict[str, Any]:
    """The settings of :data:`NUMERICS_CONFIG` this process runs with that are not jax's
    defaults (e.g. ``JAX_DEFAULT_MATMUL_PRECISION=highest`` makes GPU XLA dots IEEE
    float32 instead of TF32), so no result reads as a default run when it was not."""
    return {name: value for name, default in NUMERICS_CONFIG.items()
            if (value := getattr(jax.config, name)) != default}


def environment(backend: Backend, *, profile: str, seed: int | None,
                max_examples: int | None, impl: str | None,
                adjustments: dict[str, Any] | None = None,
                origins: dict[str, str] | None = None) -> dict[str, Any]:
    """What ran: versions, backend and its device, profile, seed, and the flags that
    narrowed the strategy or changed tolerances (``adjustments``: a loosened run can
    never be mistaken for a default one); ``origins``: where the profile, backend and
    corpus came from (:mod:`kernel_harness.orchestration.options`)."""
    try:
        device_kind = backend.device.device_kind
    except RuntimeError:  # pragma: no cover - the backend was resolved, so it exists
        device_kind = None
    return {
        "kernel_harness": _version("kernel-harness"), "jax": jax.__version__,
        "jaxlib": _version("jaxlib"), "python": platform.python_version(),
        "backend": backend.name, "backend_note": backend.note, "platform": backend.platform,
        "device_kind": device_kind, "profile": profile, "seed": seed,
        "max_examples": max_examples, "impl": impl,
        "adjustments": adjustments or {"without": [], "tolerance": [], "tolerance_scale": None},
        "origins": dict(origins or {}),
        "jax_numerics": jax_numerics(),
    }


def _number(x: float) -> float | str:
    """JSON has no NaN/Inf: those become the strings ``"nan"``, ``"inf"``, ``"-inf"``."""
    x = float(x)
    return x if math.isfinite(x) else str(x)


def _failure(outcome: PropertyOutcome) -> dict[str, Any] | None:
    result = outcome.observer.last_failure
    return None if result is None else _result_failure(result)


def _flaky_failure(found: flaky.Flaky) -> dict[str, Any] | None:
    """A FLAKY unit's failure: the failing run's case (with its outputs where it was a
    comparison), the FLAKY summary, the repro, and both runs' outcomes (``flaky``); None
    when the example cannot be replayed (the FLAKY report in ``error`` says why)."""
    first, case = found.first, found.case
    if found.repro is None:
        return None
    if isinstance(first, HarnessFailure):
        record = _result_failure(first.result)
    elif case is not None:
        record = {"case": dataclasses.asdict(case), "case_json": case.to_json(),
                  "impl": found.impl, "outputs": [], "excluded": {}}
    else:
        return None
    return record | {"summary": found.summary(), "repro": found.repro,
                     "flaky": {"failing_run": "\n".join(found.failing_run()),
                               "run_again": found.rerun}}


def _result_failure(result: CaseResult) -> dict[str, Any]:
    outputs = []
    for v in result.verdicts:
        s = v.stats
        outputs.append({
            "output": s.output, "dtype": result.case.dtype, "shape": list(s.shape),
            "axes": list(s.axes), "passed": v.passed, "problems": list(v.problems),
            "tolerance": v.tolerance.max_rel_err, "tolerance_reason": v.tolerance.reason,
            "max_abs_err": _number(s.max_abs_err), "max_rel_err": _number(s.max_rel_err),
            "scale": _number(s.scale), "mismatch_fraction": _number(s.mismatch_fraction),
            "compared": s.compared, "nan_actual": s.nan_actual, "inf_actual": s.inf_actual,
            "nan_expected": s.nan_expected, "inf_expected": s.inf_expected,
            "worst_location": s.worst_location, "worst_index": list(s.worst_index),
            "worst_actual": _number(s.worst_actual), "worst_expected": _number(s.worst_expected),
            "judged_by": v.judged_by, "usage": _number(v.usage),
            "calibrated": None if v.calibration is None else {
                k: _number(x) if isinstance(x, float) else x
                for k, x in dataclasses.asdict(v.calibration).items()},
            "per_element": None if v.elements is None else {
                k: _number(x) if isinstance(x, float) else x
                for k, x in dataclasses.asdict(v.elements).items()},
        })
    return {
        "case": dataclasses.asdict(result.case), "case_json": result.case.to_json(),
        "impl": result.impl, "summary": report.summary_lines(result),
        "outputs": outputs, "excluded": dict(result.excluded),
        "repro": report.repro_command(result),
    }


def outcome_record(outcome: PropertyOutcome) -> dict[str, Any]:
    """One property's record: verdict (PASS, FAIL, FLAKY or ERROR), examples (those that
    ran to a verdict; ``passed_examples`` of them passed), checks (judged data draws),
    compiles (distinct static configurations), rejected (examples discarded by
    ``assume()``, never failed), time, events, and the failing case with per-output
    statistics and its repro."""
    obs = outcome.observer
    found = outcome_text.flaky_of(outcome)
    failure = (None if outcome.passed else
               _failure(outcome) if found is None else _flaky_failure(found))
    # The rule of outcome_text.verdict (the text table): a failure that did not recur is
    # FLAKY, an example that failed or crashed is a FAIL, a run that did not pass without
    # one is an ERROR.
    verdict = "PASS" if outcome.passed else flaky.VERDICT if found is not None else (
        "FAIL" if failure is not None or obs.failed or obs.crashes else "ERROR")
    error = None
    if outcome.error is not None:
        error = {"type": type(outcome.error).__name__,
                 "message": str(outcome.error) if found is None else found.report()}
    return {
        "family": outcome.family, "property": outcome.prop, "backend": outcome.backend.name,
        "verdict": verdict, "examples": obs.examples, "passed_examples": obs.passed,
        "checks": obs.checks, "compiles": obs.compiles, "rejected": obs.rejected,
        "seconds": round(outcome.wall_seconds, 3), "events": dict(sorted(obs.events.items())),
        "kernels": kernels_record(outcome),
        "failure": failure, "error": error, "reason": None,
    } | ({} if outcome.cover is None else {"modes": outcome.cover.to_json(
        outcome.modes_declared)})


def kernels_record(outcome: PropertyOutcome) -> dict[str, Any] | None:
    """The ``kernels`` field: the family's expectation, checks counted, those below it, the
    declared fallback, those with an output no executed kernel wrote (``unused``), those
    with math outside their kernels the family does not allow (``outside``); None where
    nothing was counted."""
    obs = outcome.observer
    if not obs.counted or obs.expected_kernels is None:
        return None
    return {"expected": obs.expected_kernels, "counted": obs.counted,
            "fell_back": obs.fell_back, "fallback_declared": obs.fallback_declared,
            "unused": obs.unused, "outside": obs.outside}


def only_fallbacks(records: list[dict[str, Any]]) -> bool:
    """Whether kernels were counted and not one counted check ran the expected kernels (a
    run of declared fallbacks only: never green)."""
    counted = [r["kernels"] for r in records if r.get("kernels")]
    return bool(counted) and all(k["fell_back"] == k["counted"] and k["fallback_declared"]
                                 for k in counted)


def skip_record(family: str, prop: str, backend: str, reason: str) -> dict[str, Any]:
    """A property (or ``-`` for a whole family) that did not run, with the reason."""
    return {"family": family, "property": prop, "backend": backend, "verdict": "SKIP",
            "examples": 0, "passed_examples": 0, "checks": 0, "compiles": 0, "rejected": 0,
            "seconds": 0.0, "events": {}, "failure": None, "error": None, "reason": reason}


def document(env: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole JSON document (schema version :data:`SCHEMA_VERSION`)."""
    ran = [r for r in records if r["verdict"] != "SKIP"]
    counts = {v: sum(r["verdict"] == v for r in records) for v in ("PASS", "FAIL", "ERROR", "SKIP")}
    stopped = sum(r["verdict"] == "INTERRUPTED" for r in records)
    flaky_units = sum(r["verdict"] == flaky.VERDICT for r in records)
    return {
        "schema": "kernel-harness/check-results", "schema_version": SCHEMA_VERSION,
        "environment": env, "properties": records,
        "summary": {**{k.lower(): n for k, n in counts.items()},
                    **({"interrupted": stopped} if stopped else {}),
                    **({"flaky": flaky_units} if flaky_units else {}),
                    "ok": bool(ran) and all(r["verdict"] == "PASS" for r in ran)
                    and not only_fallbacks(ran)},
    }


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """Writes the document (strict JSON: no NaN)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")


def write_junit(path: Path, doc: dict[str, Any]) -> None:
    """One ``<testsuite>`` per family, one ``<testcase>`` per family x property."""
    root = ET.Element("testsuites", name="kernel-harness check")
    env = doc["environment"]
    by_family: dict[str, list[dict[str, Any]]] = {}
    for r in doc["properties"]:
        by_family.setdefault(r["family"], []).append(r)
    for family, records in by_family.items():
        suite = ET.SubElement(root, "testsuite", name=family, tests=str(len(records)),
                              failures=str(sum(r["verdict"] in ("FAIL", flaky.VERDICT)
                                               for r in records)),
                              errors=str(sum(r["verdict"] in ("ERROR", "INTERRUPTED")
                                             for r in records)),
                              skipped=str(sum(r["verdict"] == "SKIP" for r in records)),
                              time=f"{sum(r['seconds'] for r in records):.3f}")
        props = ET.SubElement(suite, "properties")
        for key in ("backend", "jax", "jaxlib", "device_kind", "profile", "seed"):
            ET.SubElement(props, "property", name=key, value=str(env[key]))
        if "corpus" in doc:  # redacted: no password (corpus/location.py)
            ET.SubElement(props, "property", name="corpus", value=doc["corpus"]["location"])
        for r in records:
            case = ET.SubElement(suite, "testcase", classname=family, name=r["property"],
                                 time=f"{r['seconds']:.3f}")
            if r["verdict"] == flaky.VERDICT:
                # The FLAKY report (both runs and the reproduce command) is the error's
                # message.
                node = ET.SubElement(case, "failure", type=flaky.VERDICT,
                                     message=r["error"]["message"].split("\n", 1)[0][:500])
                node.text = r["error"]["message"]
            elif r["verdict"] == "FAIL" and r["failure"] is None:
                # A crash or a metamorphic failure: its report (with the reproduce
                # command) is the error's message.
                error = r["error"] or {"type": "Failure", "message": "failed"}
                node = ET.SubElement(case, "failure", type=error["type"],
                                     message=error["message"].split("\n", 1)[0][:500])
                node.text = error["message"]
            elif r["verdict"] == "FAIL":
                f = r["failure"]
                node = ET.SubElement(case, "failure", message=f["summary"][0] if f["summary"]
                                     else "outputs outside tolerance", type="HarnessFailure")
                node.text = "\n".join([*f["summary"], f"reproduce: {f['repro']}"])
            elif r["verdict"] in ("ERROR", "INTERRUPTED"):
                node = ET.SubElement(case, "error", message=r["error"]["message"][:500],
                                     type=r["error"]["type"])
                node.text = r["error"]["message"]
            elif r["verdict"] == "SKIP":
                ET.SubElement(case, "skipped", message=r["reason"])
            out = ET.SubElement(case, "system-out")
            out.text = f"{r['examples']} examples; events: " + ", ".join(
                f"{k}={v}" for k, v in r["events"].items())
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def write_outputs(doc: dict[str, Any], *, json_path: Path | None, junit_path: Path | None,
                  say: Callable[[str], None] = print) -> None:
    """Writes ``doc`` as ``--json`` and/or ``--junit`` asked, saying where each went."""
    if json_path is not None:
        write_json(json_path, doc)
        say(f"results: {json_path} (JSON, schema version {SCHEMA_VERSION})")
    if junit_path is not None:
        write_junit(junit_path, doc)
        say(f"results: {junit_path} (JUnit XML)")
