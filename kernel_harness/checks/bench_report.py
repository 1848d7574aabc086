"""Presenting ``kernel-harness bench`` results: the table, the JSON document, the growth
of compiled temporaries with length, and a dependency-free SVG plot."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax

from kernel_harness.checks.bench import INTERPRET_NOTE, MEMORY_SOURCE, BenchRow, BenchSettings
from kernel_harness.checks.bench_judge import JUDGED_CALLS, REPEATED, WRONG
from kernel_harness.run.report import format_table

MIB = 1024 * 1024


def _mib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / MIB:.2f}"


def _ms(s: float) -> str:
    return f"{1e3 * s:.3g}"


def header(settings: BenchSettings) -> list[str]:
    """What ran: backend, device, jax version, dtype, mode, the timing loop, and notes."""
    b = settings.backend
    lines = [
        f"kernel-harness bench: backend {b.name} ({b.note}); device {b.device.device_kind}; "
        f"jax {jax.__version__}",
        f"  dtype {settings.dtype}, mode {settings.mode}, lengths "
        f"{','.join(map(str, settings.seq_lens))}; per config: correctness pre-check, AOT "
        f"compile (timed apart), {settings.warmup} warm-up call(s), up to {settings.iters} "
        f"timed call(s) (budget {settings.max_seconds:g}s), each on its own fresh inputs "
        f"(drawn untimed) and block_until_ready; the last {JUDGED_CALLS} calls' results "
        "judged against the reference; Pallas kernels counted in the timed program",
        f"  memory: {MEMORY_SOURCE}",
    ]
    if b.is_interpreted:
        lines.append(f"  NOTE {INTERPRET_NOTE}")
    return lines


def _results(r: BenchRow) -> str:
    """The timed results' verdict in a word: ``ok``, ``REPEATED``, ``WRONG`` or ``-``."""
    if not r.results:
        return "-"
    for problem, word in ((REPEATED, "REPEATED"), (WRONG, "WRONG")):
        if r.results.startswith(problem):
            return word
    return "ok"


def table(rows: Sequence[BenchRow]) -> str:
    """One row per kernel x length: check verdict, compile time, median and quartiles (of
    an OK row only: a FAIL's times are no result), the Pallas kernels of the timed
    program, the verdict on the timed results, calls timed, and memory in MiB."""
    headers = ["kernel", "len", "status", "compile s", "median ms", "p25-p75 ms", "kernels",
               "results", "n", "args MiB", "out MiB", "temps MiB", "dev peak MiB"]
    body = []
    for r in rows:
        t, m = r.timing, r.memory
        ok = t if r.status == "OK" else None
        body.append([
            r.family, "-" if r.seq_len is None else r.seq_len, r.status,
            f"{t.compile_s:.2f}" if t else "-",
            _ms(ok.median_s) if ok else "-",
            f"{_ms(ok.p25_s)}-{_ms(ok.p75_s)}" if ok else "-",
            "-" if r.timed_kernels is None else r.timed_kernels, _results(r),
            f"{t.iters_run}/{t.iters_requested}" if t else "-",
            _mib(m.argument_bytes) if m else "-", _mib(m.output_bytes) if m else "-",
            _mib(m.temp_bytes) if m else "-", _mib(m.device_peak_bytes) if m else "-",
        ])
    return format_table(headers, body)


def details(rows: Sequence[BenchRow]) -> list[str]:
    """Each row's pre-check verdict and reason (FAIL, ERROR and SKIP rows say why)."""
    out = []
    for r in rows:
        where = f"{r.family}" + ("" if r.seq_len is None else f" @{r.seq_len}")
        line = f"  {where} [{r.impl}]: {r.status}; pre-check {r.check}"
        if r.kernels:
            line += f"; Pallas kernels {r.kernels}"
        if r.timed_kernels is not None:
            line += f"; timed program: {r.timed_kernels} Pallas kernel(s)"
        if r.results and not r.reason.startswith(r.results):
            line += f"; timed results {r.results}"
        if r.case:
            line += f"; case {r.case}"
        if r.reason:
            line += f"; {r.reason}"
        out.append(line)
    return out


def temp_growth(rows: Sequence[BenchRow]) -> dict[str, list[tuple[int, int, float]]]:
    """Per family, ``(len_a, len_b, temps_b / temps_a)`` between consecutive measured
    lengths (temps of 0 bytes give no ratio)."""
    by_family: dict[str, list[BenchRow]] = {}
    for r in rows:
        if r.status == "OK" and r.memory is not None and r.seq_len is not None:
            by_family.setdefault(r.family, []).append(r)
    growth: dict[str, list[tuple[int, int, float]]] = {}
    for name, fam_rows in by_family.items():
        fam_rows.sort(key=lambda r: r.seq_len or 0)
        for a, b in zip(fam_rows, fam_rows[1:], strict=False):
            assert a.memory is not None and b.memory is not None
            if a.memory.temp_bytes > 0 and a.seq_len and b.seq_len:
                growth.setdefault(name, []).append(
                    (a.seq_len, b.seq_len, b.memory.temp_bytes / a.memory.temp_bytes))
    return growth


def growth_lines(rows: Sequence[BenchRow]) -> list[str]:
    """``sdpa temps: 256->512 x4.00, 512->1024 x4.00`` per family."""
    return [
        f"  {name} temps: " + ", ".join(f"{a}->{b} x{ratio:.2f}" for a, b, ratio in steps)
        for name, steps in temp_growth(rows).items()
    ]


def document(settings: BenchSettings, rows: Sequence[BenchRow]) -> dict[str, Any]:
    """The JSON document of a run (``--json``)."""
    b = settings.backend
    return {
        "jax_version": jax.__version__,
        "backend": b.name, "backend_note": b.note, "platform": b.platform,
        "device_kind": b.device.device_kind,
        "dtype": settings.dtype, "mode": settings.mode, "seq_lens": list(settings.seq_lens),
        "warmup": settings.warmup, "iters": settings.iters,
        "inputs": "a fresh input set per call, warm-up calls included, drawn untimed",
        "judged_calls": JUDGED_CALLS,
        "max_seconds": settings.max_seconds,
        "memory_source": MEMORY_SOURCE,
        "interpret_note": INTERPRET_NOTE if b.is_interpreted else None,
        "temp_growth": {k: [list(s) for s in v] for k, v in temp_growth(rows).items()},
        "rows": [r.to_json() for r in rows],
    }


_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2")


def _panel(x0: float, title: str, series: dict[str, list[tuple[int, float]]],
           unit: str) -> list[str]:
    w, h, pad = 360.0, 260.0, 50.0
    points = [p for s in series.values() for p in s if p[1] > 0]
    out = [f'<text x="{x0 + w / 2}" y="20" text-anchor="middle">{title}</text>']
    if not points:
        return out + [f'<text x="{x0 + w / 2}" y="150" text-anchor="middle">no data</text>']
    lx = [math.log2(p[0]) for p in points]
    ly = [math.log10(p[1]) for p in points]
    x_lo, x_hi = min(lx), max(lx) + 1e-9
    y_lo, y_hi = min(ly) - 0.1, max(ly) + 0.1

    def xy(n: int, v: float) -> tuple[float, float]:
        x = x0 + pad + (math.log2(n) - x_lo) / (x_hi - x_lo or 1) * (w - 2 * pad)
        y = 30 + (h - pad) - (math.log10(v) - y_lo) / (y_hi - y_lo) * (h - pad - 10)
        return x, y

    out.append(f'<rect x="{x0 + pad}" y="30" width="{w - 2 * pad}" height="{h - pad}" '
               'fill="none" stroke="#888"/>')
    out.append(f'<text x="{x0 + 4}" y="{30 + h / 2}" font-size="10">{unit} (log)</text>')
    for n in sorted({p[0] for p in points}):
        x, _ = xy(n, 10 ** y_lo)
        out.append(f'<text x="{x}" y="{h + 45}" font-size="10" text-anchor="middle">{n}</text>')
    for i, (name, pts) in enumerate(sorted(series.items())):
        color = _COLORS[i % len(_COLORS)]
        coords = [xy(n, v) for n, v in sorted(pts) if v > 0]
        if coords:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}"/>')
            out += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>'
                    for x, y in coords]
        out.append(f'<text x="{x0 + w - 10}" y="{45 + 14 * i}" font-size="11" '
                   f'text-anchor="end" fill="{color}">{name}</text>')
    return out


def svg(settings: BenchSettings, rows: Sequence[BenchRow]) -> str:
    """Median time and compiled temporaries against length, log scales, one line per
    kernel (only OK rows: a FAIL is never plotted)."""
    times: dict[str, list[tuple[int, float]]] = {}
    temps: dict[str, list[tuple[int, float]]] = {}
    for r in rows:
        if r.status == "OK" and r.timing and r.memory and r.seq_len:
            times.setdefault(r.family, []).append((r.seq_len, 1e3 * r.timing.median_s))
            temps.setdefault(r.family, []).append((r.seq_len, r.memory.temp_bytes / MIB))
    b = settings.backend
    title = (f"backend {b.name} ({b.device.device_kind}), {settings.dtype}, {settings.mode}"
             + (" - interpret: not kernel performance" if b.is_interpreted else ""))
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="760" height="340" '
             'font-family="sans-serif" font-size="12">',
             '<rect width="100%" height="100%" fill="white"/>',
             f'<text x="380" y="335" text-anchor="middle" font-size="11">{title}; '
             'x: sequence length</text>']
    parts += _panel(10, "median time per call", times, "ms")
    parts += _panel(390, "compiled temporaries", temps, "MiB")
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _measured(row: BenchRow | None) -> str:
    if row is None:
        return "not measured (no such family)"
    ran = f"; Pallas kernels {row.kernels}" if row.kernels else ""
    if row.status != "OK" or row.timing is None or row.memory is None:
        return f"{row.status}: {row.reason or row.check}{ran}"
    t, m = row.timing, row.memory
    peak = "" if m.device_peak_bytes is None else f", device peak {_mib(m.device_peak_bytes)} MiB"
    return (f"median {_ms(t.median_s)} ms (p25-p75 {_ms(t.p25_s)}-{_ms(t.p75_s)}, "
            f"{t.iters_run} calls, {row.timed_kernels} Pallas kernel(s) timed), temps "
            f"{_mib(m.temp_bytes)} MiB{peak}; pre-check pass, timed results pass{ran}")


def selection_lines(sel: Any, candidates: Sequence[str],
                    rows: dict[str, BenchRow | None], settings: BenchSettings) -> list[str]:
    """``kernel-harness select --bench``: each candidate's reason with its measurement
    (``sel`` is a :class:`kernel_harness.run.select.Selection`)."""
    reasons = {name: f"passed over: {why}" for name, why in sel.passed_over}
    reasons[sel.kernel] = f"CHOSEN: {sel.reason}"
    b = settings.backend
    lines = [f"measured with kernel-harness bench on backend {b.name} ({b.device.device_kind}), "
             f"{settings.dtype} {settings.mode} @{settings.seq_lens[0]}, each checked first:"]
    if b.is_interpreted:
        lines.append(f"  NOTE {INTERPRET_NOTE}")
    for name in candidates:
        why = reasons.get(name, "not considered: a better candidate was chosen")
        lines.append(f"  {name} [{why}]: {_measured(rows.get(name))}")
    return lines
