"""Benchmark of the harness itself (not a test): what a kernel author waits for.

    .venv/bin/python benchmarks/harness.py [--family splash] [--profile ci] [--examples 30]
                                           [--draws-per-compile K]
                                           [--skip bare,cache,planted] [--out FILE.json]

Every measurement runs in a fresh process (JAX caches compiled programs in memory, so two
measurements in one process would flatter the second). It prints one table:

- harness vs bare loop: the ``matches-reference`` property (Hypothesis, events, judging,
  reporting) against a bare loop that calls only the family's kernel run and reference on
  the same drawn cases (every judged data draw, read back from the property run; the bare
  loop also computes the calibrated judge's low-precision yardstick where the case's dtype
  is judged by it: a second reference, not harness overhead); cache off
  on both sides. Reports checks (judged draws) per second and per compile (distinct static
  configuration); ``--draws-per-compile`` K (default: the profile's) draws per compile.
  Target: the harness costs at most 10% over the bare loop.
- ``check FAMILY --profile P``, pristine, with a cold then a warm compile cache.
- the same check with a planted splash backward bug (segment ids ignored in the dk/dv
  kernel; the ``dkv-ignores-segments`` mutant) and a cold cache: seconds to the first failure
  report (printed as soon as the failing example is found) and in total. Target: the first
  report within 60 s of the failing example, the whole check within 2x the pristine one.

Takes a few minutes on an idle 2-core machine (much longer when the machine is shared:
compare figures measured back to back only).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_HARNESS_CHILD = """
import json, sys, time
from kernel_harness import get_family, resolve_backend
from kernel_harness.checks.properties import Observer, build_property, run_property
from kernel_harness.run.profiles import get_profile
family = get_family(sys.argv[1]); backend = resolve_backend("interpret")
cases = []
class Collect(Observer):
    def record_result(self, result):
        cases.append(result.case.to_json()); super().record_result(result)
obs = Collect()
prop = build_property("matches-reference", family, backend=backend, observer=obs,
                      draws_per_compile=int(sys.argv[4]))
t, cpu = time.perf_counter(), time.process_time()
out = run_property("matches-reference", family, prop, backend=backend, observer=obs,
                   profile=get_profile(sys.argv[2]), max_examples=int(sys.argv[3]))
print(json.dumps({"seconds": time.perf_counter() - t, "cpu_s": time.process_time() - cpu,
                  "cases": cases, "passed": out.passed,
                  "examples": obs.examples, "checks": obs.checks,
                  "compiles": obs.compiles}))
"""

_BARE_CHILD = """
import json, sys, time
import numpy as np
from kernel_harness import get_family, resolve_backend
from kernel_harness.run.runner import low_precision_outputs
family = get_family(sys.argv[1]); backend = resolve_backend("interpret")
cases = [family.case_type.from_json(c) for c in json.load(open(sys.argv[2]))]
t, cpu = time.perf_counter(), time.process_time()
for case in cases:
    inputs = case.materialize()
    out = family.run(family.kernel, case, inputs, backend)
    ref = family.reference(case, inputs)
    low = low_precision_outputs(family, case, inputs, backend) or {}
    [np.asarray(v) for v in (*out.values(), *ref.values(), *low.values())]
print(json.dumps({"seconds": time.perf_counter() - t, "cpu_s": time.process_time() - cpu}))
"""


def _child(code: str, *args: str, env: dict[str, str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark child failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _check(argv: list[str], env: dict[str, str]) -> dict:
    """Runs ``kernel-harness check`` streaming its output; seconds to the first failure
    report, to the end, and the exit code."""
    cmd = [sys.executable, "-m", "kernel_harness.cli", "check", *argv]
    start = time.perf_counter()
    first = None
    lines = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=env, cwd=ROOT) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if first is None and line.startswith("--- first failing example"):
                first = time.perf_counter() - start
    total = time.perf_counter() - start
    return {"seconds": total, "first_report": first, "exit": proc.returncode,
            "tail": "".join(lines[-40:])}


def _planted_module(where: Path) -> str:
    """Writes the splash kernel with the dkv-ignores-segments mutant as a module; returns
    its ``--impl`` spec."""
    from kernel_harness.families.splash.mutants import MUTANTS
    from kernel_harness.records.mutant import apply
    from kernel_harness.regression.mutate import module_origin

    mutant = next(m for m in MUTANTS if m.name == "dkv-ignores-segments")
    source = module_origin(mutant.module).read_text()
    (where / "planted_splash.py").write_text(apply(mutant, source))
    return "planted_splash:make_splash_mha"


def main() -> None:
    """Runs the benchmark and prints the table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--family", default="splash")
    p.add_argument("--profile", default="ci")
    p.add_argument("--examples", type=int, default=30, help="for harness vs bare loop")
    p.add_argument("--draws-per-compile", type=int, default=None, metavar="K",
                   help="data draws per compiled program (default: the profile's)")
    p.add_argument("--skip", default="", help="comma list of: bare, cache, planted")
    p.add_argument("--out", type=Path, default=None, help="also write the figures as JSON")
    args = p.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    tmp = Path(tempfile.mkdtemp(prefix="kh-bench-"))
    env = {**os.environ, "PYTHONPATH": f"{tmp}{os.pathsep}{ROOT}",
           "KERNEL_HARNESS_COMPILE_CACHE": "off"}
    rows: list[tuple[str, str, str]] = []
    figures: dict = {"machine": f"{os.cpu_count()} CPUs, {sys.platform}",
                     "loadavg": os.getloadavg()}
    import jax

    figures["jax"] = jax.__version__
    from kernel_harness.run.profiles import draws_per_compile

    k = args.draws_per_compile or draws_per_compile(args.profile)
    figures["draws_per_compile"] = k

    if "bare" not in skip:
        h = _child(_HARNESS_CHILD, args.family, args.profile, str(args.examples), str(k),
                   env=env)
        cases = tmp / "cases.json"
        cases.write_text(json.dumps(h["cases"]))
        b = _child(_BARE_CHILD, args.family, str(cases), env=env)
        n = len(h["cases"])
        over = h["seconds"] / b["seconds"] - 1
        # CPU time of each process: steadier than wall time on a shared machine.
        over_cpu = h["cpu_s"] / b["cpu_s"] - 1
        from kernel_harness import get_family

        case_type = get_family(args.family).case_type
        static = len({case_type.from_json(c).static_key() for c in h["cases"]})
        figures["bare"] = {"examples": h["examples"], "checks": n, "compiles": h["compiles"],
                           "harness_s": h["seconds"], "bare_s": b["seconds"],
                           "harness_cpu_s": h["cpu_s"], "bare_cpu_s": b["cpu_s"],
                           "static_configurations": static}
        rows += [
            (f"matches-reference, harness (cache off, K={k})", f"{n / h['seconds']:.3f} chk/s",
             f"{h['examples']} examples, {n} checks in {h['seconds']:.1f}s"),
            ("checks per compile", f"{n / max(h['compiles'], 1):.2f}",
             f"{n} checks, {h['compiles']} compiles ({static} static configurations)"),
            ("same cases, bare kernel+reference loop", f"{n / b['seconds']:.3f} chk/s",
             f"{b['seconds']:.1f}s"),
            ("harness overhead over the bare loop, wall", f"{100 * over:+.0f}%",
             "target <= +10%: " + ("met" if over <= 0.10 else "NOT met")),
            ("harness overhead over the bare loop, CPU", f"{100 * over_cpu:+.0f}%",
             f"{h['cpu_s']:.1f}s vs {b['cpu_s']:.1f}s of process CPU time"),
        ]

    base = ["--profile", args.profile, args.family, "--draws-per-compile", str(k)]
    pristine = None
    if "cache" not in skip:
        cache = tmp / "cache"
        cold = _check([*base, "--compile-cache", str(cache)], env)
        warm = _check([*base, "--compile-cache", str(cache)], env)
        pristine = cold["seconds"]
        figures["cache"] = {"cold_s": cold["seconds"], "warm_s": warm["seconds"],
                            "exit": [cold["exit"], warm["exit"]]}
        rows += [
            (f"check {args.family} --profile {args.profile}, cold cache",
             f"{cold['seconds']:.1f}s", f"exit {cold['exit']}"),
            (f"check {args.family} --profile {args.profile}, warm cache",
             f"{warm['seconds']:.1f}s",
             f"exit {warm['exit']}, {cold['seconds'] / warm['seconds']:.2f}x faster"),
        ]
    if "planted" not in skip and args.family == "splash":
        impl = _planted_module(tmp)
        bug = _check([*base, "--impl", impl, "--compile-cache", str(tmp / "cache-bug")], env)
        figures["planted"] = {k: bug[k] for k in ("seconds", "first_report", "exit")}
        first = "never" if bug["first_report"] is None else f"{bug['first_report']:.1f}s"
        ratio = "" if pristine is None else f", {bug['seconds'] / pristine:.2f}x the pristine"
        rows += [
            ("planted dkv-ignores-segments: first failure report", first,
             "printed when the failing example is found"),
            ("planted dkv-ignores-segments: whole check", f"{bug['seconds']:.1f}s",
             f"exit {bug['exit']}{ratio} (target <= 2x)"),
        ]
        figures["planted_tail"] = bug["tail"]
    width = max(len(r[0]) for r in rows) if rows else 10
    print(f"kernel-harness benchmark: jax {figures['jax']}, {figures['machine']}, "
          f"load average at start {figures['loadavg'][0]:.1f}")
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:>12}  {note}")
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
