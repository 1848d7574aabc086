"""Mutation self-check: plant realistic bugs in a kernel's source, see the harness catch them.

A family's catalog (``kernel_harness/families/<name>/mutants.py``, ``MUTANTS``)
lists :class:`Mutant` s: a module (the upstream kernel or our own), a source text
and its replacement. For each mutant a child Python process installs an import
hook that loads the mutated source in place of the original module, before the
family imports it, then runs every property of the family (ci profile, a small
example budget, no shrinking) and the golden check. The parent prints a kill
matrix (mutant x property, with examples and seconds to the first failure).

A mutant whose text is not found (or found more than once without an
``occurrence``) is an ERROR: the catalog went stale. So is a mutant whose module
the family never imported, one that does not compile, and a run that fails
without the mutant (the control).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.abc
import importlib.util
import json
import linecache
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernel_harness.spec.family import Family
from kernel_harness.spec.mutant import Mutant, StaleMutant, patched_source
from kernel_harness.spec.registry import BUILTIN_FAMILIES, UnknownFamily, family_target

#: Columns of the matrix next to the properties: the stored golden cases, and the
#: accuracy gate on the same cases (errors against the recorded baseline).
GOLDEN_COLUMN = "golden"
GATE_COLUMN = "gate"
DEFAULT_MAX_EXAMPLES = 20


def catalog_module(family_name: str) -> str:
    """The module a family's catalog lives in: ``mutants`` next to its registered module."""
    try:
        target = family_target(family_name)
    except UnknownFamily:
        raise ValueError(f"unknown family {family_name!r}") from None
    return target.partition(":")[0].rpartition(".")[0] + ".mutants"


def families_with_catalogs() -> list[str]:
    """The built-in families that keep a mutant catalog (found without importing it)."""
    return [name for name in BUILTIN_FAMILIES
            if importlib.util.find_spec(catalog_module(name)) is not None]


def load_catalog(family_name: str, spec: str | None = None) -> list[Mutant]:
    """The mutants of a family: ``spec`` (``MODULE:ATTR``) or the ``mutants`` module next to
    the family's registered module."""
    if spec is None:
        spec = catalog_module(family_name) + ":MUTANTS"
    module, _, attr = spec.partition(":")
    try:
        mutants = getattr(importlib.import_module(module), attr or "MUTANTS")
    except (ImportError, AttributeError) as e:
        raise ValueError(f"no mutant catalog for {family_name!r} at {spec}: {e}") from None
    names = [m.name for m in mutants]
    if len(set(names)) != len(names):
        raise ValueError(f"{spec}: duplicate mutant names")
    return list(mutants)


# ---------------------------------------------------------------- the child process


class _MutantLoader(importlib.abc.Loader):
    def __init__(self, finder: _MutantFinder):
        self.finder = finder

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        f = self.finder
        filename = f"{f.origin} [mutant {f.name}]"
        linecache.cache[filename] = (len(f.source), None, f.source.splitlines(True), filename)
        module.__file__ = f.origin
        exec(compile(f.source, filename, "exec"), module.__dict__)  # noqa: S102


class _MutantFinder(importlib.abc.MetaPathFinder):
    """Serves the mutated source for exactly one module name."""

    def __init__(self, module: str, origin: str, source: str, name: str):
        self.module, self.origin, self.source, self.name = module, origin, source, name
        self.hits = 0

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.module:
            return None
        self.hits += 1
        spec = importlib.util.spec_from_loader(fullname, _MutantLoader(self), origin=self.origin)
        spec.has_location = True
        return spec


def _import_family(target: str) -> Family:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def _run_column(family: Family, prop_name: str, backend: Any, settings: Any,
                draws_per_compile: int = 1) -> dict[str, Any]:
    import hypothesis

    from kernel_harness.checks.properties import Observer, build_property

    start = time.perf_counter()
    first: dict[str, Any] = {}

    class FirstFailure(Observer):
        def record_result(self, result: Any) -> None:  # every judged draw comes here
            super().record_result(result)
            if not result.passed and not first:
                first.update(seconds=time.perf_counter() - start, examples=self.examples + 1,
                             checks=self.checks,
                             how="wrong " + ",".join(v.stats.output for v in result.failures))

    def timed_run(impl: Any, case: Any, inputs: Any, b: Any) -> Any:
        try:
            return family.run(impl, case, inputs, b)
        except Exception as e:
            if not first:
                first.update(seconds=time.perf_counter() - start,
                             examples=observer.examples + 1,
                             how=f"crash {type(e).__name__}: {str(e)[:80]}")
            raise

    observer = FirstFailure()
    timed = dataclasses.replace(family, run=timed_run)
    try:
        prop = build_property(prop_name, timed, backend=backend, observer=observer,
                              draws_per_compile=draws_per_compile)
    except Exception as e:  # noqa: BLE001 - PropertyNotApplicable: a column that cannot run
        if type(e).__name__ != "PropertyNotApplicable":
            raise
        return {"killed": False, "skipped": f"not applicable: {e}", "wall_s": 0.0}
    cap = getattr(sys.modules.get("kernel_harness.checks.metamorphic"), "example_cap", None)
    if cap is not None:  # metamorphic properties run a fraction of the examples
        settings = hypothesis.settings(settings, max_examples=cap(prop, settings.max_examples))
    error = None
    try:
        hypothesis.settings(settings)(prop)()
    except Exception as e:  # noqa: BLE001 - a failure is the expected outcome here
        error = e
    if error is not None and not first:
        first.update(seconds=time.perf_counter() - start, examples=max(observer.examples, 1),
                     how=f"{type(error).__name__}: {str(error)[:80]}")
    return {"killed": error is not None, "examples": observer.examples,
            "checks": observer.checks, "compiles": observer.compiles,
            "wall_s": time.perf_counter() - start, **first}


def _golden_column(family: Family, backend: Any, golden_root: str | None) -> dict[str, Any]:
    from kernel_harness.regression import golden

    start = time.perf_counter()
    root = Path(golden_root) if golden_root else None
    if not (golden.family_dir(family.name, root) / golden.MANIFEST).exists():
        return {"killed": False, "skipped": f"not applicable: {family.name} has no goldens",
                "wall_s": 0.0}
    try:
        cases = golden.load_manifest(family, root)
    except golden.GoldenError as e:
        return {"killed": False, "skipped": str(e), "wall_s": 0.0}
    first: dict[str, Any] = {}
    compared = 0
    for i, g in enumerate(cases):
        try:
            o = golden.check_golden(family, g, backend, root=root)
        except Exception as e:  # noqa: BLE001 - a crash under a mutant is a kill
            o = golden.GoldenOutcome(family=family.name, name=g.name, status="FAIL",
                                     detail=f"crash {type(e).__name__}: {str(e)[:80]}")
        compared += o.status in ("PASS", "FAIL")
        if o.status == "ERROR":
            return {"killed": False, "skipped": o.detail, "wall_s": time.perf_counter() - start}
        if o.status == "FAIL":
            first = {"seconds": time.perf_counter() - start, "examples": i + 1,
                     "how": f"{g.name}: {o.detail[:80]}"}
            break
    if not compared:
        return {"killed": False, "skipped": "no comparable goldens", "wall_s": 0.0}
    return {"killed": bool(first), "examples": compared,
            "wall_s": time.perf_counter() - start, **first}


def _gate_column(family: Family, backend: Any, golden_root: str | None) -> dict[str, Any]:
    from kernel_harness.regression import gate, golden

    start = time.perf_counter()
    root = Path(golden_root) if golden_root else None
    if not gate.default_path(family.name, root).exists():
        return {"killed": False, "skipped": f"not applicable: {family.name} has no baseline",
                "wall_s": 0.0}
    try:
        section = gate.baseline_section(family, backend, gate.default_path(family.name, root))
        cases = golden.load_manifest(family, root)
    except (gate.GateError, golden.GoldenError) as e:
        return {"killed": False, "skipped": str(e), "wall_s": 0.0}
    for i, g in enumerate(cases):
        try:
            rows = gate.evaluate(section["cases"], gate.measure(family, backend, [g]), [g])
            worse = [f"{r.output} {r.verdict} {r.after:.2g} (was {r.before or 0:.2g})"
                     for r in rows if r.failed]
        except Exception as e:  # noqa: BLE001 - a crash under a mutant is a kill
            worse = [f"crash {type(e).__name__}: {str(e)[:80]}"]
        if worse:
            return {"killed": True, "examples": i + 1, "seconds": time.perf_counter() - start,
                    "how": f"{g.name}: {'; '.join(worse)[:80]}",
                    "wall_s": time.perf_counter() - start}
    return {"killed": False, "examples": len(cases), "wall_s": time.perf_counter() - start}


def child_main(config_path: str) -> None:
    """Entry of the child process: install the mutant, run the columns, write JSON."""
    config = json.loads(Path(config_path).read_text())
    result: dict[str, Any] = {"columns": {}}
    finder = None
    try:
        if config.get("module"):
            if config["module"] in sys.modules:
                raise RuntimeError(f"{config['module']} was imported before the mutant")
            finder = _MutantFinder(config["module"], config["origin"],
                                   Path(config["source_path"]).read_text(), config["mutant"])
            sys.meta_path.insert(0, finder)
        from kernel_harness.core.backends import resolve_backend
        from kernel_harness.run.profiles import get_profile

        try:
            family = _import_family(config["family_target"])
        except Exception as e:
            raise RuntimeError(f"the family does not import: {type(e).__name__}: {e}") from e
        if finder is not None and not finder.hits:
            raise RuntimeError(f"the family never imported {config['module']}")
        backend = resolve_backend(config["backend"])
        from hypothesis import Phase, settings

        base = get_profile(config["profile"])
        run_settings = settings(
            base, max_examples=config["max_examples"], database=None, derandomize=True,
            phases=(Phase.explicit, Phase.generate),
        )
        for name in config["properties"]:
            if config.get("first_kill") and any(c["killed"] for c in result["columns"].values()):
                result["columns"][name] = {"killed": False, "skipped": "not run", "wall_s": 0.0}
                continue
            result["columns"][name] = _run_column(family, name, backend, run_settings,
                                                  config.get("draws_per_compile", 1))
        if config["golden"]:
            result["columns"][GOLDEN_COLUMN] = _golden_column(family, backend,
                                                              config.get("golden_root"))
            result["columns"][GATE_COLUMN] = _gate_column(family, backend,
                                                          config.get("golden_root"))
    except Exception as e:  # noqa: BLE001 - reported as the mutant's ERROR
        result["error"] = f"{type(e).__name__}: {e}"
    Path(config["result_path"]).write_text(json.dumps(result))


# ---------------------------------------------------------------- the parent process


@dataclasses.dataclass(frozen=True, kw_only=True)
class MutantResult:
    """One row of the kill matrix (``mutant`` is ``None`` for the unmutated control).

    ``status``: KILLED, SURVIVED or ERROR for a mutant; PASS or FAILED for the control.
    """

    mutant: str | None
    status: str
    columns: dict[str, dict[str, Any]]
    error: str = ""
    wall_s: float = 0.0


def _child_command(config_path: Path) -> list[str]:
    code = ("import sys; from kernel_harness.regression.mutate import child_main; "
            "child_main(sys.argv[1])")
    return [sys.executable, "-c", code, str(config_path)]


def run_one(
    family_name: str, mutant: Mutant | None, *, properties: Sequence[str],
    backend: str = "interpret", profile: str = "ci", max_examples: int = DEFAULT_MAX_EXAMPLES,
    golden: bool = True, golden_root: Path | None = None, timeout: float = 900,
    first_kill: bool = False, draws_per_compile: int = 1,
) -> MutantResult:
    """Runs the family's properties in a child process with ``mutant`` installed
    (``draws_per_compile``: data draws per compiled program of matches-reference)."""
    name = None if mutant is None else mutant.name
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kh-mutant-") as tmp:
        config: dict[str, Any] = {
            "family_target": family_target(family_name), "mutant": name,
            "properties": list(properties), "backend": backend, "profile": profile,
            "max_examples": max_examples, "golden": golden, "first_kill": first_kill,
            "draws_per_compile": draws_per_compile,
            "golden_root": str(golden_root) if golden_root else None,
            "result_path": str(Path(tmp) / "result.json"),
        }
        if mutant is not None:
            try:
                origin, mutated = patched_source(mutant)
                compile(mutated, f"{origin} [mutant {mutant.name}]", "exec")
            except (StaleMutant, SyntaxError, ImportError) as e:
                return MutantResult(mutant=name, status="ERROR", columns={},
                                    error=f"{type(e).__name__}: {e}")
            source_path = Path(tmp) / "mutated.py"
            source_path.write_text(mutated)
            config.update(module=mutant.module, origin=str(origin), source_path=str(source_path))
        config_path = Path(tmp) / "config.json"
        config_path.write_text(json.dumps(config))
        try:
            proc = subprocess.run(_child_command(config_path), capture_output=True, text=True,
                                  timeout=timeout, check=False, env=os.environ.copy())
        except subprocess.TimeoutExpired:
            return MutantResult(mutant=name, status="ERROR", columns={},
                                error=f"timed out after {timeout:.0f}s",
                                wall_s=time.perf_counter() - start)
        result_path = Path(config["result_path"])
        if not result_path.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            return MutantResult(mutant=name, status="ERROR", columns={},
                                error=f"child exited {proc.returncode}: " + " | ".join(tail),
                                wall_s=time.perf_counter() - start)
        result = json.loads(result_path.read_text())
    wall = time.perf_counter() - start
    columns = result.get("columns", {})
    if result.get("error"):
        return MutantResult(mutant=name, status="ERROR", columns=columns, error=result["error"],
                            wall_s=wall)
    killed = any(c.get("killed") for c in columns.values())
    if mutant is None:
        status = "FAILED" if killed else "PASS"
    else:
        status = "KILLED" if killed else "SURVIVED"
    return MutantResult(mutant=name, status=status, columns=columns, wall_s=wall)


def compared_nothing(control: MutantResult) -> list[str]:
    """The golden/gate columns that compared nothing in the control run, with the reason
    (e.g. no golden of a comparable backend, no baseline of this jax version): a column
    that cannot kill any mutant there must not read as one that merely did not."""
    return [f"{name}: {col['skipped']}" for name in (GOLDEN_COLUMN, GATE_COLUMN)
            if (col := control.columns.get(name)) and col.get("skipped")
            and not col["skipped"].startswith(("not applicable", "not run"))]


def _cell(col: dict[str, Any] | None, control: bool) -> str:
    if col is None:
        return "-"
    if col.get("skipped"):
        return "n/a" if col["skipped"].startswith("not applicable") else \
            "-" if col["skipped"] == "not run" else "skip"
    if col.get("killed"):
        return f"{'FAILED' if control else 'killed'} {col.get('examples', '?')}ex " \
            f"{col.get('seconds', 0.0):.1f}s"
    return f"{'passed' if control else 'survived'} {col.get('examples', 0)}ex"


def kill_matrix(results: Sequence[MutantResult], columns: Sequence[str]) -> str:
    """The mutant x property table: examples and seconds to the first failure."""
    from kernel_harness.run.report import format_table

    rows = []
    for r in results:
        label = r.mutant or "(control: no mutant)"
        cells = [_cell(r.columns.get(c), r.mutant is None) for c in columns]
        rows.append([label, *cells, f"{r.wall_s:.0f}s", r.status])
    return format_table(["mutant", *columns, "wall", "verdict"], rows)
