"""Failure text (one-line summary first, then detail and a repro command) and summary tables."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from kernel_harness.core.tolerance import Verdict
from kernel_harness.records import registry
from kernel_harness.records.registry import UnknownFamily, get_family
from kernel_harness.run import impl_source, kernel_eager, kernel_outside, kernel_poison, rerun
from kernel_harness.run.runner import CaseResult

PREFIX = "[kernel-harness]"


def _shape(case: object, verdict: Verdict) -> str:
    """The case's own shape summary if it has one, else the output's shape."""
    describe = getattr(case, "shape_summary", None)
    if callable(describe):
        return describe()
    return "shape=(" + ",".join(map(str, verdict.stats.shape)) + ")"


def repro_command(result: CaseResult) -> str:
    """A shell command that reruns exactly this case."""
    return case_repro_command(
        result.family, result.backend.name, result.case, result.impl_spec, result.adjustments
    )


def case_repro_command(
    family: str, backend: str, case: Any, impl_spec: str | None, adjustments: Sequence[str] = ()
) -> str:
    """``kernel-harness repro FAMILY --backend B --case JSON [--impl M:A] [flags]``:
    ``adjustments`` (``--tolerance ...``) travel with it, so a loosened check replays
    loosened, and says so."""
    parts = ["kernel-harness", "repro", family, "--backend", backend, "--case", case.to_json()]
    if impl_spec:
        parts += ["--impl", impl_spec]
    parts += registry.family_module_args(family)
    return shlex.join([*parts, *adjustments])


def export_command(result: CaseResult) -> str | None:
    """A shell command writing this case as a standalone script (no harness needed), or
    None when the family has no export hook; an out-of-tree family's ``--family-module``
    and the check's ``--tolerance`` flags travel with it, as with the repro command."""
    try:
        if get_family(result.family).export is None:
            return None
    except UnknownFamily:
        return None
    parts = [
        "kernel-harness", "export-repro", result.family,
        "--backend", result.backend.name,
        "--case", result.case.to_json(),
    ]
    if result.impl_spec:
        parts += ["--impl", result.impl_spec]
    parts += [*registry.family_module_args(result.family), *result.adjustments]
    return shlex.join([*parts, "--out", f"repro_{result.family.replace('-', '_')}.py"])


def summary_line(result: CaseResult, verdict: Verdict) -> str:
    """``FAIL splash dq float32 q=... backend=interpret: <problem> at batch=0 head=1 ...``."""
    s = verdict.stats
    problem = "; ".join(verdict.problems) or "ok"
    shape = _shape(result.case, verdict)
    return (
        f"{PREFIX} FAIL {result.family} {s.output} {result.case.dtype} {shape} "
        f"backend={result.backend.name}: {problem} (max abs err {s.max_abs_err:.3g}) "
        f"at {s.worst_location}"
    ).replace("  ", " ")


def kernel_line(result: CaseResult) -> str:
    """``FAIL gpu-softmax no Pallas kernel (fwd) rows=... backend=interpret: the forward pass
    ran 0 Pallas kernel(s) ...; it ran instead: exp, ...`` ("" unless the example ran fewer
    kernels than the family expects without a declared fallback)."""
    problem = result.kernel_problem
    if not problem:
        return ""
    return _class_line(result, f"no Pallas kernel ({', '.join(result.fell_back)})", problem)


def unused_line(result: CaseResult) -> str:
    """``FAIL gpu-softmax kernel result unused (output `result`) rows=... backend=interpret:
    the implementation's output `result` does not depend on any executed Pallas kernel: ...``
    ("" unless poisoning found an output no executed kernel wrote)."""
    unused = result.unused_results
    if not unused:
        return ""
    return _class_line(result, f"{kernel_poison.UNUSED} ({', '.join(unused)})",
                       kernel_poison.problem_text(unused))


def outside_line(result: CaseResult) -> str:
    """``FAIL gpu-softmax math outside the kernel (forward: exp, reduce_sum) rows=...
    backend=interpret: exp, reduce_sum outside any Pallas kernel (forward) ...`` ("" unless
    the example ran math outside its kernels that the family does not allow)."""
    bad = result.outside_math
    if not bad or result.outside_kernel is None:
        return ""
    what = "; ".join(f"{where}: {', '.join(names)}" for where, names in bad.items())
    return _class_line(result, f"{kernel_outside.OUTSIDE} ({what})",
                       kernel_outside.problem_text(bad, result.outside_kernel))


def elementwise_line(result: CaseResult) -> str:
    """``FAIL gpu-norm math outside the kernel (forward: mul) ...`` for a layout-only family
    whose example ran elementwise arithmetic, comparisons or gathers outside its kernels
    ("" unless it did); said after every other class (a cheat of another class often
    spells itself with them too)."""
    bad = result.outside_elementwise
    if not bad or result.outside_kernel is None:
        return ""
    what = "; ".join(f"{where}: {', '.join(names)}" for where, names in bad.items())
    return _class_line(result, f"{kernel_outside.OUTSIDE} ({what})",
                       kernel_outside.problem_text(bad, result.outside_kernel)
                       + "; the family's wrapper is layout only: "
                       + result.outside_kernel.layout_only)


def _class_line(result: CaseResult, what: str, problem: str) -> str:
    """``FAIL <family> <what> <dtype> <shape> backend=<backend>: <problem>``: the one line of
    a failure class that is not an output's comparison (no kernel, result unused, math
    outside the kernel)."""
    describe = getattr(result.case, "shape_summary", None)
    shape = describe() if callable(describe) else ""
    return (f"{PREFIX} FAIL {result.family} {what} {result.case.dtype} {shape} "
            f"backend={result.backend.name}: {problem}").replace("  ", " ")


def rerun_line(result: CaseResult) -> str:
    """``FAIL gpu-softmax nondeterministic (out) ...: running the same compiled program again
    ...`` ("" unless a bitwise rerun changed an output)."""
    changed = result.rerun_changed
    if not changed:
        return ""
    names = ", ".join(c.split(":")[0] for c in changed)
    return _class_line(result, f"{rerun.NONDETERMINISTIC} ({names})",
                       rerun.problem_text(changed))


def eager_line(result: CaseResult) -> str:
    """``FAIL gpu-softmax behaves otherwise when called eagerly ...: called directly, outside
    any trace ...`` ("" unless a direct call differed from the traced program)."""
    changed = result.eager_changed
    if not changed:
        return ""
    return _class_line(result, kernel_eager.EAGER, kernel_eager.problem_text(changed))


def source_line(result: CaseResult) -> str:
    """``FAIL gpu-softmax suspicious source (observes the harness) ...: the implementation's
    source has code that can behave differently when it is checked ...`` ("" unless the
    implementation's reachable source has a line :mod:`kernel_harness.run.impl_source`
    names that the user's config does not accept)."""
    found = result.suspicious_source
    if not found:
        return ""
    kinds = ", ".join(sorted({f.kind for f in found}))
    return _class_line(result, f"{impl_source.SUSPICIOUS} ({kinds})",
                       impl_source.problem_text(found))


def failure_classes(result: CaseResult) -> str:
    """A failing case's classes in a few words, the first failing check first: ``no Pallas
    kernel (fwd); wrong out,dq`` (``kernel-harness mutate``'s kill column)."""
    kinds = ", ".join(sorted({f.kind for f in result.suspicious_source}))
    parts = [f"no Pallas kernel ({', '.join(result.fell_back)})" if result.kernel_problem
             else "", kernel_poison.UNUSED if result.unused_results else "",
             kernel_outside.OUTSIDE if result.outside_math else "",
             rerun.NONDETERMINISTIC if result.rerun_changed else "",
             kernel_eager.EAGER if result.eager_changed else "",
             f"{impl_source.SUSPICIOUS} ({kinds})" if kinds else "",
             kernel_outside.OUTSIDE if result.outside_elementwise else "",
             "wrong " + ",".join(v.stats.output for v in result.failures)
             if result.failures else ""]
    return "; ".join(p for p in parts if p) or "failed"


def summary_lines(result: CaseResult) -> list[str]:
    """The one-line summaries of a failing case: its kernel count and kernel results
    first, then each output."""
    first = [line for line in (kernel_line(result), unused_line(result),
                               outside_line(result), rerun_line(result),
                               eager_line(result), source_line(result),
                               elementwise_line(result)) if line]
    return first + [summary_line(result, v) for v in result.failures]


def _judge_cells(v: Verdict) -> tuple[str, str]:
    """The ``tol`` and ``lowp`` cells: the fixed bound and "-", or for the calibrated
    judge ``cal`` and the kernel/low-precision error ratio where it is worst."""
    c = v.calibration
    if c is None:
        return f"{v.tolerance.max_rel_err:.2g}", "-"
    if c.worst_lowp_err > 0:
        return f"{c.multiple:g}xlowp", f"{c.worst_kernel_err / c.worst_lowp_err:.3g}"
    # No low-precision error anywhere: a kernel error of 0 is no ratio, any other is inf.
    return f"{c.multiple:g}xlowp", "0" if c.worst_kernel_err == 0 else "inf"


def stats_table(verdicts: Sequence[Verdict]) -> str:
    """One row per output: errors, tolerance (or the calibrated judge and its
    kernel/low-precision ratio), mismatch fraction, NaN/Inf, worst place."""
    # The slice column as wide as its longest location (and a space), so the next starts
    # apart (a slice of four named axes is longer than 28 characters).
    width = max([28, *(len(v.stats.worst_slice_location) + 1 for v in verdicts)])
    header = (
        f"  {'output':<8}{'max_abs':>11}{'max_rel':>11}{'tol':>10}{'k/lowp':>8}{'mismatch':>10}"
        f"{'nan':>6}{'inf':>6}{'slice_rel':>11}  {'worst slice':<{width}}"
        f"{'worst (actual vs expected)'}"
    )
    rows = [header]
    for v in verdicts:
        s = v.stats
        tol, ratio = _judge_cells(v)
        rows.append(
            f"  {s.output:<8}{s.max_abs_err:>11.3g}{s.max_rel_err:>11.3g}"
            f"{tol:>10}{ratio:>8}{100 * s.mismatch_fraction:>9.2f}%"
            f"{s.nan_actual:>6}{s.inf_actual:>6}{s.slice_rel_err:>11.3g}  "
            f"{s.worst_slice_location:<{width}}{s.worst_location} "
            f"({s.worst_actual:.6g} vs {s.worst_expected:.6g})"
            f"{'' if v.passed else '  <-- FAIL'}"
        )
    return "\n".join(rows)


def failure_report(result: CaseResult) -> str:
    """The full text of a failing case: summary lines, detail, repro command."""
    lines = summary_lines(result)
    lines += [
        f"  family:   {result.family}   impl: {result.impl}",
        f"  backend:  {result.backend.name} ({result.backend.note})",
        f"  case:     {result.case!r}",
        "  compared: scale = max |reference| per output; mismatch = elements with error above "
        "tol x scale; slice_rel = worst error over its own slice's max |reference| (floored "
        "at a fraction of the scale), judged against the same tol",
    ]
    if any(v.calibration is not None for v in result.verdicts):
        lines.append(
            "  calibrated: tol 'Nxlowp' = error at most N x that of the same plain math in "
            f"{result.case.dtype} at the default precision (+ a floor), globally and per "
            "slice; k/lowp = kernel error / that error where the bound is tightest")
    for v in result.verdicts:
        if v.elements is not None and v.tolerance.per_element is not None:
            e = v.elements
            lines.append(f"  per element: {e.output} {v.tolerance.per_element.describe()} "
                         f"(ulp of {e.dtype} at the reference value); worst use "
                         f"{e.usage:.3g} at {e.worst_where}, {e.over} of {e.checked} over")
    if result.excluded:
        lines.append(f"  excluded (outside the kernel's contract): {result.excluded}")
    for name, why in result.not_compared.items():
        lines.append(f"  not compared: {name} ({why}; the adapter supplies it on both sides)")
    if result.kernels is not None:
        lines.append(f"  kernels:  {result.kernels.event()} (expected "
                     f"{result.expected_kernels.describe() if result.expected_kernels else '-'})"
                     + (f"; poisoning judged nothing: {result.kernels.poison_error}"
                        if result.kernels.poison_error else "")
                     + (f"; core by value not judged: {result.kernels.core_skipped}"
                        if result.kernels.core_skipped else ""))
    if result.adjustments:
        lines.append(f"  tolerances NOT the family's defaults: {' '.join(result.adjustments)}")
    lines.append(stats_table(result.verdicts))
    lines.append(f"  reproduce: {repro_command(result)}")
    export = export_command(result)
    lines.append(f"  export:    {export or f'({result.family} has no export hook yet)'}")
    return "\n".join(lines)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain left-aligned text table."""
    cells = [list(map(str, headers))] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)
