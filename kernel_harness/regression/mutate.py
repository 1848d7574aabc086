"""Mutation self-check: plant realistic bugs in a kernel's source, see the harness catch them.

A family's catalog (``kernel_harness/families/<name>/mutants.py``, ``MUTANTS``)
lists :class:`Mutant` s: a module (the upstream kernel or our own), a source text
and its replacement. For each mutant a process of its own (forked from one child process
that imported jax and the harness once: :mod:`.mutant_child`) installs an import
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
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

# Columns of the matrix next to the properties: the stored golden cases, and the accuracy
# gate on the same cases (errors against the recorded baseline).
from kernel_harness.checks.modes import cover_budget, mode_cover, modes_first
from kernel_harness.orchestration.session import default_example_timeout
from kernel_harness.records.mutant import Mutant, StaleMutant, patched_source
from kernel_harness.records.registry import (
    BUILTIN_FAMILIES,
    UnknownFamily,
    family_target,
    get_family,
)
from kernel_harness.regression.mutant_child import (
    GATE_COLUMN,
    GOLDEN_COLUMN,
    outcome,
    project_narrowed,
    status_path,
)

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
    elif os.getcwd() not in sys.path:  # like --impl: the working tree's catalog imports
        sys.path.insert(0, os.getcwd())
    module, _, attr = spec.partition(":")
    try:
        mutants = getattr(importlib.import_module(module), attr or "MUTANTS")
    except (ImportError, AttributeError) as e:
        raise ValueError(f"no mutant catalog for {family_name!r} at {spec}: {e}") from None
    names = [m.name for m in mutants]
    if len(set(names)) != len(names):
        raise ValueError(f"{spec}: duplicate mutant names")
    return list(mutants)


def catalog_impl(family_name: str, spec: str | None = None) -> str | None:
    """The implementation (``MODULE:ATTR``) a catalog's mutants are planted in, when it is
    not the family's kernel: the catalog module's ``IMPL`` (for a family whose default
    kernel fails on its own, its finding, the mutants go into the corrected one). None:
    the family's kernel."""
    module = (spec or catalog_module(family_name)).partition(":")[0]
    try:
        return getattr(importlib.import_module(module), "IMPL", None)
    except ImportError:
        return None


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


def _cover_json(family_name: str, profile: str, max_examples: int, *, seed: int | None,
                asked: bool | None) -> list[str] | None:
    """The modes cover every mutant's matches-reference starts with, as check's does in
    ``profile`` with ``--seed seed`` and ``--[no-]modes-first`` (``asked``; None: not a
    modes-first run), drawn once here for all the mutants: the cases depend on the family's
    strategy, not on its kernel."""
    if not modes_first(profile, asked):
        return None
    family = project_narrowed(get_family(family_name))
    cover = mode_cover(family, run_seed=0 if seed is None else seed,
                       budget=cover_budget(max_examples))
    return [case.to_json() for case in cover.cases]


def _zygote_command(plan_path: Path) -> list[str]:
    code = ("import sys; from kernel_harness.regression.mutant_child import zygote_main; "
            "zygote_main(sys.argv[1])")
    return [sys.executable, "-c", code, str(plan_path)]


def run_many(
    family_name: str, mutants: Sequence[Mutant | None], *, properties: Sequence[str],
    backend: str = "interpret", profile: str = "ci", max_examples: int = DEFAULT_MAX_EXAMPLES,
    golden: bool = True, golden_root: Path | None = None, timeout: float = 900,
    first_kill: bool = False, draws_per_compile: int = 1, seed: int | None = None,
    modes_first: bool | None = None, catalog: str | None = None,
    on_result: Callable[[MutantResult], None] | None = None,
    example_timeout: float | None = None,
) -> list[MutantResult]:
    """Runs the family's properties once per entry of ``mutants`` (``None``: the unmutated
    control), each with its mutant installed, in a process of its own forked from one child
    process (:mod:`.mutant_child`); ``timeout`` is per mutant. ``on_result`` gets each result
    as soon as its run ends (the CLI prints it). ``seed``: the run's seed, as ``check --seed``
    takes it (Hypothesis's stream and the modes cover; None: derandomized, cover seed 0);
    ``modes_first``: as ``check --[no-]modes-first`` (None: the profile's default);
    ``catalog``: the catalog's ``MODULE:ATTR`` when not the family's own, whose ``IMPL``
    (:func:`catalog_impl`) every run, the control too, uses in place of the family's
    kernel; ``example_timeout``: an example whose kernel run takes longer kills the mutant
    as a hang (None: the limit ``check`` applies, :func:`~kernel_harness.orchestration.
    session.default_example_timeout`; 0: none); within ``timeout``, which ends any run as an
    ERROR."""
    return run_families(
        {family_name: mutants}, properties=properties, backend=backend, profile=profile,
        max_examples=max_examples, golden=golden, golden_root=golden_root, timeout=timeout,
        first_kill=first_kill, draws_per_compile=draws_per_compile, seed=seed,
        modes_first=modes_first, catalogs={family_name: catalog}, on_result=on_result,
        example_timeout=example_timeout)[family_name]


def run_families(
    selection: Mapping[str, Sequence[Mutant | None]], *, properties: Sequence[str],
    backend: str = "interpret", profile: str = "ci", max_examples: int = DEFAULT_MAX_EXAMPLES,
    golden: bool = True, golden_root: Path | None = None, timeout: float = 900,
    first_kill: bool = False, draws_per_compile: int = 1, seed: int | None = None,
    modes_first: bool | None = None, catalogs: Mapping[str, str | None] | None = None,
    on_result: Callable[[MutantResult], None] | None = None,
    example_timeout: float | None = None,
) -> dict[str, list[MutantResult]]:
    """:func:`run_many` of several families' mutants, every run forked from one child
    process (one import of jax and the harness for all of them): each family's results in
    its order. ``catalogs``: a family's catalog when not its own (see :func:`run_many`)."""
    if not hasattr(os, "fork"):
        raise RuntimeError("kernel-harness mutate forks a process per mutant: it needs "
                           "os.fork (Linux or macOS), which this platform lacks")
    entries: list[tuple[str, Mutant | None]] = [
        (family, m) for family, mutants in selection.items() for m in mutants]
    results: list[MutantResult | None] = [None] * len(entries)
    shared = {"properties": list(properties), "backend": backend, "profile": profile,
              "max_examples": max_examples, "golden": golden, "first_kill": first_kill,
              "draws_per_compile": draws_per_compile, "seed": seed,
              "golden_root": str(golden_root) if golden_root else None}
    per_family: dict[str, dict[str, Any]] = {}
    for family in selection:
        limit = (default_example_timeout([get_family(family)]) if example_timeout is None
                 else example_timeout)
        per_family[family] = {
            "family_target": family_target(family),
            "cover": _cover_json(family, profile, max_examples, seed=seed, asked=modes_first),
            "impl": catalog_impl(family, (catalogs or {}).get(family)),
            "example_timeout": limit or None}
    with tempfile.TemporaryDirectory(prefix="kh-mutant-") as tmp:
        runs: list[tuple[int, dict[str, Any]]] = []
        for i, (family, mutant) in enumerate(entries):
            name = None if mutant is None else mutant.name
            config: dict[str, Any] = {**shared, **per_family[family], "mutant": name,
                                      "result_path": str(Path(tmp) / f"{i}.json")}
            if mutant is not None:
                try:
                    origin, mutated = patched_source(mutant)
                    compile(mutated, f"{origin} [mutant {mutant.name}]", "exec")
                except (StaleMutant, SyntaxError, ImportError) as e:
                    results[i] = MutantResult(mutant=name, status="ERROR", columns={},
                                              error=f"{type(e).__name__}: {e}")
                    continue
                source_path = Path(tmp) / f"{i}.mutated.py"
                source_path.write_text(mutated)
                config.update(module=mutant.module, origin=str(origin),
                              source_path=str(source_path))
            runs.append((i, config))
        if runs:  # else every entry stale: nothing to run
            _run_forked(runs, [m for _, m in entries], results, Path(tmp), timeout,
                        on_result)
    by_family: dict[str, list[MutantResult]] = {family: [] for family in selection}
    for (family, _), result in zip(entries, results, strict=True):
        if result is not None:
            by_family[family].append(result)
    return by_family


def _run_forked(runs: list[tuple[int, dict[str, Any]]], mutants: list[Mutant | None],
                results: list[MutantResult | None], tmp: Path, timeout: float,
                on_result: Callable[[MutantResult], None] | None) -> None:
    """Runs ``runs`` in processes forked from one child, filling ``results`` in order."""
    plan_path = tmp / "plan.json"
    plan_path.write_text(json.dumps({"timeout": timeout, "runs": [c for _, c in runs]}))
    # One thread when it forks: numpy's OpenBLAS would otherwise start a pool at import.
    env = {**os.environ, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}
    proc = subprocess.Popen(_zygote_command(plan_path), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    configs = dict(runs)
    try:
        for i in range(len(mutants)):  # in order; a stale entry's ERROR is already there
            if i in configs:
                status = status_path(configs[i])
                while not status.exists() and proc.poll() is None:
                    time.sleep(0.05)
                results[i] = _result(mutants[i], outcome(configs[i]), timeout)
            if on_result is not None and results[i] is not None:
                on_result(results[i])
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    zygote_output = proc.communicate(timeout=300)[0]
    for line in zygote_output.splitlines():
        if line.startswith("kernel-harness mutate: warning"):
            print(line, file=sys.stderr)
    if proc.returncode:
        raise RuntimeError(f"the mutant child process exited {proc.returncode}: "
                           f"{zygote_output.strip()[-2000:]}")


def _result(mutant: Mutant | None, found: dict[str, Any], timeout: float) -> MutantResult:
    name = None if mutant is None else mutant.name
    wall = found.get("wall_s", 0.0)
    columns = found.get("columns", {})
    if found.get("error"):
        error = found["error"]
        if error == "timed out":
            error = f"timed out after {timeout:.0f}s"
        return MutantResult(mutant=name, status="ERROR", columns=columns, error=error,
                            wall_s=wall)
    killed = any(c.get("killed") for c in columns.values())
    if mutant is None:
        status = "FAILED" if killed else "PASS"
    else:
        status = "KILLED" if killed else "SURVIVED"
    return MutantResult(mutant=name, status=status, columns=columns, wall_s=wall)


def run_one(family_name: str, mutant: Mutant | None, **kw: Any) -> MutantResult:
    """:func:`run_many` of one mutant (``None``: the control)."""
    return run_many(family_name, [mutant], **kw)[0]


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
