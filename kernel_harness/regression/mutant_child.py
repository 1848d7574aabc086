"""The child side of ``kernel-harness mutate``: one process per family run (the "zygote")
imports jax, Hypothesis and the harness once, then forks a fresh process for every mutant.

Each forked process installs its mutant's import hook (a ``sys.meta_path`` finder serving the
mutated source) before anything imports the module, imports the family, runs the columns
(the properties, golden, gate) and writes its result, then exits: no mutant can leak into
the next, which starts again from the zygote's state, where the module was never imported
(a mutant of a module already imported there is an ERROR, never a silent pass). Forking
instead of starting a Python process per mutant saves what every mutant would import again
(``import jax`` and the harness: about 1 s a mutant). The zygote has run nothing on a jax
backend when it forks (no XLA thread pools to inherit half-locked). It times each mutant out
on its own (killing only that process) and reports a mutant whose process died (a segfault,
an abort) with its exit status and the last lines it printed.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.abc
import importlib.util
import json
import linecache
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernel_harness.records.family import Family

#: What the zygote imports before it forks: everything a mutant's run needs that cannot
#: import the family or a kernel module (each forked process checks that its mutated module
#: was not imported before its hook was installed).
PREIMPORTS = (
    "jax", "jax.numpy", "jax.experimental.pallas", "hypothesis",
    "kernel_harness.core.backends", "kernel_harness.run.profiles",
    "kernel_harness.checks.properties", "kernel_harness.regression.golden",
    "kernel_harness.regression.gate",
)
#: The columns of the kill matrix next to the properties (names shared with mutate.py).
GOLDEN_COLUMN = "golden"
GATE_COLUMN = "gate"
POLL_SECONDS = 0.05


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
    return project_narrowed(getattr(importlib.import_module(module), attr))


def project_narrowed(family: Family) -> Family:
    """``family`` without the features the project's ``known-bugs`` leave out of it (as
    ``check`` leaves them out): a control run on a declared known bug would fail."""
    from kernel_harness.records.config import load_config
    from kernel_harness.records.narrow import narrow

    return narrow(family, {f for bug in load_config().known_bugs
                           if bug["family"] == family.name for f in bug["without"]})


def _run_column(family: Family, prop_name: str, backend: Any, settings: Any,
                draws_per_compile: int = 1, cover: list[str] | None = None,
                seed: int | None = None, example_timeout: float | None = None,
                on_hang: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """One property's column. ``example_timeout``: an example whose kernel run takes longer
    is a hang, the column killed by it: ``on_hang(column)`` is called (from a watchdog
    thread, with the kernel still stuck) and must end the process."""
    import hypothesis

    from kernel_harness.checks.properties import Observer, build_property
    from kernel_harness.run import crash, report

    start = time.perf_counter()
    first: dict[str, Any] = {}

    class FirstFailure(Observer):
        def record_result(self, result: Any) -> None:  # every judged draw comes here
            super().record_result(result)
            if not result.passed and not first:
                first.update(seconds=time.perf_counter() - start, examples=self.examples + 1,
                             checks=self.checks, case=result.case.to_json(),
                             how=report.failure_classes(result))

    def hung(case: Any) -> None:
        assert on_hang is not None
        on_hang({"killed": True, "examples": observer.examples + 1, "checks": observer.checks,
                 "compiles": observer.compiles, "wall_s": time.perf_counter() - start,
                 "seconds": time.perf_counter() - start, "case": case.to_json(),
                 "how": f"hang: no result within {example_timeout:g}s"})

    def timed_run(impl: Any, case: Any, inputs: Any, b: Any) -> Any:
        watchdog = None
        if example_timeout and on_hang is not None:
            watchdog = threading.Timer(example_timeout, hung, args=(case,))
            watchdog.daemon = True
            watchdog.start()
        try:
            return family.run(impl, case, inputs, b)
        except Exception as e:
            if not first:
                first.update(seconds=time.perf_counter() - start,
                             examples=observer.examples + 1, case=case.to_json(),
                             how=f"crash {crash.crash_summary(e)}")
            raise
        finally:
            if watchdog is not None:
                watchdog.cancel()

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
    if cover is not None:  # as check runs it in this profile: the modes' cover first
        from kernel_harness.checks.modes import Cover, start_with_cover

        cases = tuple(family.case_type.from_json(c) for c in cover)
        prop, left, _ = start_with_cover(
            prop, family, max_examples=settings.max_examples, run_seed=None,
            cover=Cover(cases=cases, reached=(), missing=(), draws=0, seconds=0.0))
        settings = hypothesis.settings(settings, max_examples=left)
    test = hypothesis.settings(settings)(prop)
    if seed is not None:  # as check --seed: this stream, not the derandomized one
        test = hypothesis.seed(seed)(test)
    error = None
    try:
        test()
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


def run_config(config: dict[str, Any]) -> None:
    """One mutant's run (in its own forked process): install the mutant, import the family,
    run the columns, write the result JSON to ``config["result_path"]``."""
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
        from kernel_harness.run import impl_source
        from kernel_harness.run.profiles import get_profile

        impl_source.use_project_accepted()  # as check does: control and mutants alike
        try:
            family = _import_family(config["family_target"])
        except Exception as e:
            raise RuntimeError(f"the family does not import: {type(e).__name__}: {e}") from e
        if config.get("impl"):  # the catalog's mutants are planted in this implementation
            from kernel_harness.records.impl import load_impl

            family = dataclasses.replace(family, kernel=load_impl(config["impl"]))
        if finder is not None and not finder.hits:
            raise RuntimeError(f"the family never imported {config['module']}")
        backend = resolve_backend(config["backend"])
        from hypothesis import Phase, settings

        base = get_profile(config["profile"])
        run_settings = settings(
            base, max_examples=config["max_examples"], database=None,
            derandomize=config.get("seed") is None,
            phases=(Phase.explicit, Phase.generate),
        )
        for name in config["properties"]:
            if config.get("first_kill") and any(c["killed"] for c in result["columns"].values()):
                result["columns"][name] = {"killed": False, "skipped": "not run", "wall_s": 0.0}
                continue
            result["columns"][name] = _run_column(
                family, name, backend, run_settings, config.get("draws_per_compile", 1),
                cover=config.get("cover"), seed=config.get("seed"),
                example_timeout=config.get("example_timeout"),
                on_hang=functools.partial(_hung, result, name, config))
        if config["golden"]:
            result["columns"][GOLDEN_COLUMN] = _golden_column(family, backend,
                                                              config.get("golden_root"))
            result["columns"][GATE_COLUMN] = _gate_column(family, backend,
                                                          config.get("golden_root"))
    except Exception as e:  # noqa: BLE001 - reported as the mutant's ERROR
        result["error"] = f"{type(e).__name__}: {e}"
    _write_whole(Path(config["result_path"]), json.dumps(result))


def _hung(result: dict[str, Any], name: str, config: dict[str, Any],
          column: dict[str, Any]) -> None:
    """A kernel run hung in ``name``'s column: the result so far with that column killed
    by the hang is written, and the process ends at once (the stuck kernel cannot be
    interrupted; the golden and gate columns are not run)."""
    result["columns"][name] = column
    _write_whole(Path(config["result_path"]), json.dumps(result))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _write_whole(path: Path, text: str) -> None:
    """Writes ``path`` so that a reader never sees it half written: the parent polls for
    the status file and reads it the moment it exists (an empty read failed CI once)."""
    part = path.with_name(path.name + ".part")
    part.write_text(text)
    os.replace(part, path)


def status_path(config: dict[str, Any]) -> Path:
    """Where the zygote writes one run's status (whole, once the run's process ended)."""
    return Path(config["result_path"]).with_suffix(".status.json")


def _log_path(config: dict[str, Any]) -> Path:
    return Path(config["result_path"]).with_suffix(".log")


def _forked(config: dict[str, Any]) -> None:
    """The forked process: its output to the mutant's log, then :func:`run_config`."""
    code = 0
    try:
        fd = os.open(_log_path(config), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        run_config(config)
    except BaseException:  # noqa: BLE001 - reported by the missing result, with the log
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _wait(pid: int, timeout: float) -> tuple[str, int | None]:
    """``("exited", status)`` (a signal as its negative number), or ``("timeout", None)``
    after killing the process."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return "exited", os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout", None
        time.sleep(POLL_SECONDS)


def zygote_main(config_path: str) -> None:
    """Entry of the zygote: ``{"timeout": seconds, "runs": [config, ...]}``; each run forked
    in turn, its status (exit code or timeout, wall seconds) written beside its result."""
    plan = json.loads(Path(config_path).read_text())
    for name in PREIMPORTS:
        importlib.import_module(name)
    from kernel_harness.core.devices import request_cpu_devices

    request_cpu_devices()  # the zygote owns its process: collective families' devices
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    if threads > 1:  # forking a threaded process can deadlock the child: say so, loudly
        print(f"kernel-harness mutate: warning: {threads} threads in the process mutants "
              "are forked from (OPENBLAS_NUM_THREADS=1 keeps numpy's pool out)", flush=True)
    for config in plan["runs"]:
        sys.stdout.flush()
        sys.stderr.flush()
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            _forked(config)
        how, code = _wait(pid, plan["timeout"])
        _write_whole(status_path(config), json.dumps(
            {"how": how, "exit": code, "wall_s": time.perf_counter() - start}))


def outcome(config: dict[str, Any]) -> dict[str, Any]:
    """What one forked run left: its result JSON, or ``{"error": ...}`` saying why there is
    none (timed out, or the process died: its exit status and the last lines it printed);
    ``wall_s`` beside it."""
    status_file, result_path = status_path(config), Path(config["result_path"])
    if not status_file.exists():
        return {"error": "not run: the zygote process ended before this mutant", "wall_s": 0.0}
    status = json.loads(status_file.read_text())
    if status["how"] == "timeout":
        return {"error": "timed out", "wall_s": status["wall_s"]}
    if result_path.exists():
        return {**json.loads(result_path.read_text()), "wall_s": status["wall_s"]}
    log = _log_path(config)
    tail = log.read_text(errors="replace").strip().splitlines()[-5:] if log.exists() else []
    code = status["exit"]
    died = f"killed by signal {-code}" if code is not None and code < 0 else f"exited {code}"
    return {"error": f"child {died}: " + " | ".join(tail), "wall_s": status["wall_s"]}
