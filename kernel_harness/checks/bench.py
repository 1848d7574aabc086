"""Benchmarks that are checked first: ``kernel-harness bench``.

For each family that provides a :class:`~kernel_harness.records.bench.Bench` hook and
each sequence length, one configuration is

1. checked against its reference with the family's own adapter and judge
   (:func:`kernel_harness.run.runner.check_case`, one case at that shape, forward and
   gradients whatever the timed mode): a configuration that fails is reported FAIL and
   is not timed, since a fast wrong kernel is not a result;
2. compiled ahead of time (``jax.jit(fn).lower(args).compile()``), the compile time
   reported on its own, and the Pallas kernels of the timed program counted in its jaxpr;
3. measured: the compiled program's own memory accounting (``memory_analysis()``:
   argument, output, temporary bytes) and, where the device keeps statistics (GPU,
   TPU; not the CPU), the device's peak bytes in use after the run;
4. timed: ``warmup`` untimed calls, then up to ``iters`` calls, each on its own freshly
   drawn input set (drawn and placed on the device outside the timing), each timed alone
   (``time.perf_counter``) until its results are ready (``jax.block_until_ready``),
   stopping early once ``max_seconds`` of timed calls have passed; the median, quartiles,
   min and max and the number of calls actually timed are reported;
5. judged: the results of the last timed calls against the reference on their own
   inputs, with the family's judge and tolerances. A result wrong there, or repeated
   across distinct inputs (a memoizing implementation), or a timed program that runs
   fewer Pallas kernels than the family expects, makes the row FAIL, naming the class
   (:mod:`kernel_harness.checks.bench_judge`).

Under ``interpret`` / ``tpu-interpret`` a Pallas kernel is simulated on the CPU: its
times say nothing about kernel performance and its memory numbers are the
interpreter's. XLA programs (SDPA) are real compiled CPU programs there.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax

from kernel_harness.checks.bench_judge import (
    call_inputs,
    judge_timed,
    kernels_problem,
    time_calls,
    timed_kernels,
)
from kernel_harness.core.backends import Backend
from kernel_harness.records.bench import MODES
from kernel_harness.records.family import Family
from kernel_harness.run.runner import CaseResult, check_case, impl_name

#: Per-backend defaults: (sequence lengths, warm-up calls, timed calls, seconds budget).
DEFAULTS: dict[str, tuple[tuple[int, ...], int, int, float]] = {
    "interpret": ((256, 512), 1, 5, 10.0),
    "tpu-interpret": ((256,), 1, 3, 10.0),
    "tpu": ((1024, 2048, 4096, 8192), 5, 30, 20.0),
    "gpu": ((1024, 2048, 4096, 8192, 16384, 32768), 5, 30, 20.0),
}

INTERPRET_NOTE = (
    "interpret mode: Pallas kernels are SIMULATED on the CPU; their times and memory are the "
    "interpreter's, not kernel performance (a smoke test that the benchmark runs). SDPA is a "
    "real compiled XLA program on the CPU: its compiled memory accounting is meaningful."
)

MEMORY_SOURCE = (
    "args/outputs/temps: the compiled program's memory_analysis() (XLA's buffer assignment "
    "for this program); device peak: jax Device.memory_stats()['peak_bytes_in_use'], the "
    "process-wide high-water mark after this row ran (monotone over rows; absent on the CPU)"
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Timing:
    """Seconds per call over the timed calls (compile time separate); ``input_sets``
    distinct input sets were used, one per call, warm-up calls included."""

    compile_s: float
    warmup: int
    iters_requested: int
    iters_run: int
    median_s: float
    p25_s: float
    p75_s: float
    min_s: float
    max_s: float
    input_sets: int

    @classmethod
    def of(cls, samples: Sequence[float], *, compile_s: float, warmup: int,
           iters_requested: int) -> Timing:
        """Summarizes per-call ``samples`` (at least one)."""
        if not samples:
            raise ValueError("no timed calls: nothing to summarize")
        xs = sorted(samples)
        if len(xs) >= 2:
            q = statistics.quantiles(xs, n=4, method="inclusive")
            p25, p75 = q[0], q[2]
        else:
            p25 = p75 = xs[0]
        return cls(compile_s=compile_s, warmup=warmup, iters_requested=iters_requested,
                   iters_run=len(xs), median_s=statistics.median(xs), p25_s=p25, p75_s=p75,
                   min_s=xs[0], max_s=xs[-1], input_sets=warmup + len(xs))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Memory:
    """Bytes as the compiled program accounts for them, and the device's peak if known."""

    argument_bytes: int
    output_bytes: int
    temp_bytes: int
    alias_bytes: int
    generated_code_bytes: int
    device_peak_bytes: int | None
    device_peak_note: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchRow:
    """One kernel at one length: OK (checked, measured, timed, its timed results judged),
    FAIL (the pre-check failed or crashed: not timed; or the timed program's results or
    kernels do not stand: the reason names the class), ERROR (the timed program itself
    raised) or SKIP (the family cannot run this configuration here; the reason says
    why)."""

    family: str
    impl: str
    seq_len: int | None
    dtype: str
    mode: str
    backend: str
    status: str
    check: str
    case: str = ""
    timing: Timing | None = None
    memory: Memory | None = None
    reason: str = ""
    #: The Pallas kernels the pre-check ran and what the family expects
    #: (:func:`kernels_text`); "" where no pre-check ran.
    kernels: str = ""
    #: The Pallas kernels in the timed program's jaxpr (None: not traced).
    timed_kernels: int | None = None
    #: The verdict on the timed calls' own results
    #: (:func:`kernel_harness.checks.bench_judge.judge_timed`); "" where none were judged.
    results: str = ""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchSettings:
    """What ``kernel-harness bench`` runs."""

    backend: Backend
    seq_lens: tuple[int, ...]
    dtype: str
    mode: str
    warmup: int
    iters: int
    max_seconds: float

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; choose one of {', '.join(MODES)}")
        if self.warmup < 0 or self.iters < 1 or self.max_seconds <= 0:
            raise ValueError("warmup must be >= 0, iters >= 1 and max_seconds > 0")
        if not self.seq_lens or min(self.seq_lens) < 1:
            raise ValueError(f"seq_lens must be positive lengths, got {self.seq_lens}")


def defaults_for(backend: Backend) -> tuple[tuple[int, ...], int, int, float]:
    """``(seq_lens, warmup, iters, max_seconds)`` for a backend."""
    return DEFAULTS[backend.name]


def kernels_text(result: CaseResult) -> str:
    """Which kernels a checked case really ran, from the same count as ``check``
    (:mod:`kernel_harness.run.kernel_count`): ``fwd 1, bwd 2 (expected fwd >= 1, bwd >= 1)``,
    with a declared fallback or a shortfall named; a family whose kernel is XLA or torch by
    design says so."""
    if result.expected_kernels is None or result.kernels is None:
        return "not counted (the family's kernel is XLA or torch by design)"
    text = (f"{result.kernels.event().removeprefix('pallas kernels: ')} "
            f"(expected {result.expected_kernels.describe()})")
    if result.fell_back:
        text += (f"; FALLBACK declared: {result.fallback_declared}"
                 if result.fallback_declared is not None
                 else f"; FALLBACK: {result.kernel_problem}")
    if result.unused_results:
        text += f"; KERNEL RESULT UNUSED: {', '.join(result.unused_results)}"
    for where, names in result.outside_math.items():
        text += f"; MATH OUTSIDE THE KERNEL ({where}): {', '.join(names)}"
    return text


def check_chosen(family: Family, backend: Backend, seq_len: int, dtype: str = "bfloat16",
                 impl: Callable[..., Any] | None = None) -> tuple[bool, str]:
    """``kernel-harness select``'s proof that the chosen kernel is what runs: ``family``'s
    benchmark case at ``seq_len`` checked once against its reference, with its kernels
    counted. Returns ``(ok, line)``: not ok when the check fails or a pass ran fewer Pallas
    kernels than the family expects (a silent fallback)."""
    assert family.bench is not None
    case = family.bench.case_at(seq_len, dtype)
    try:
        result = check_case(family, case, backend, impl)
    except Exception as e:  # noqa: BLE001 - a crash is the answer, reported
        return False, (f"ran: {family.name} on {backend.name} CRASHED at @{seq_len} {dtype}: "
                       f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
    return result.passed, (f"ran: {family.name} on {backend.name} @{seq_len} {dtype}: Pallas "
                           f"kernels {kernels_text(result)}; checked against the reference: "
                           f"{_check_summary(result)}")


def _check_summary(result: CaseResult) -> str:
    worst = max(result.verdicts,
                key=lambda v: v.stats.max_rel_err / max(v.tolerance.max_rel_err, 1e-30))
    outputs = ",".join(v.stats.output for v in result.verdicts)
    verdict = "pass" if result.passed else "FAIL"
    failures = [f"{v.stats.output}: {'; '.join(v.problems)}" for v in result.failures]
    if result.kernel_problem:
        failures.append(f"no Pallas kernel: {result.kernel_problem}")
    problems = "" if result.passed else ": " + "; ".join(failures)
    return (f"{verdict} ({outputs}; worst {worst.stats.output} rel err "
            f"{worst.stats.max_rel_err:.2g} vs tol {worst.tolerance.max_rel_err:.2g}){problems}")


def _device_peak(backend: Backend) -> tuple[int | None, str]:
    stats = backend.device.memory_stats()
    if not stats or "peak_bytes_in_use" not in stats:
        return None, f"{backend.device.platform} device keeps no memory statistics"
    return int(stats["peak_bytes_in_use"]), "Device.memory_stats()['peak_bytes_in_use']"


def memory_of(compiled: Any, backend: Backend) -> Memory:
    """The compiled program's ``memory_analysis()`` and the device's peak bytes."""
    analysis = compiled.memory_analysis()
    if analysis is None:
        raise RuntimeError(f"jax {jax.__version__}: Compiled.memory_analysis() returned None "
                           f"on {backend.platform}; the benchmark cannot report memory")
    peak, note = _device_peak(backend)
    return Memory(
        argument_bytes=int(analysis.argument_size_in_bytes),
        output_bytes=int(analysis.output_size_in_bytes),
        temp_bytes=int(analysis.temp_size_in_bytes),
        alias_bytes=int(analysis.alias_size_in_bytes),
        generated_code_bytes=int(analysis.generated_code_size_in_bytes),
        device_peak_bytes=peak, device_peak_note=note,
    )


def _row(family: Family, impl: str, seq_len: int | None,
         settings: BenchSettings, status: str, check: str = "", **fields: Any) -> BenchRow:
    return BenchRow(family=family.name, impl=impl, seq_len=seq_len,
                    dtype=settings.dtype, mode=settings.mode, backend=settings.backend.name,
                    status=status, check=check, **fields)


def bench_one(family: Family, seq_len: int, settings: BenchSettings,
              impl: Callable[..., Any] | None = None, impl_spec: str | None = None
              ) -> BenchRow:
    """Checks, measures and times one family at one length (see the module docstring)."""
    hook, backend = family.bench, settings.backend
    assert hook is not None
    name = impl_name(impl or family.kernel, impl_spec)
    try:
        case = hook.case_at(seq_len, settings.dtype)
    except ValueError as e:
        return _row(family, name, seq_len, settings, "SKIP", "not run",
                    reason=f"no benchmark case at this length and dtype: {e}")
    summary = getattr(case, "shape_summary", None)
    described = summary() if callable(summary) else case.to_json()
    try:
        result = check_case(family, case, backend, impl, impl_spec=impl_spec)
    except Exception as e:  # noqa: BLE001 - a crash is a failed pre-check, reported
        return _row(family, name, seq_len, settings, "FAIL",
                    f"FAIL (crashed: {type(e).__name__}: {str(e).splitlines()[0][:200]})",
                    case=described, reason="pre-check crashed: not timed")
    check, kernels = _check_summary(result), kernels_text(result)
    if not result.passed:
        return _row(family, name, seq_len, settings, "FAIL", check, case=described,
                    kernels=kernels, reason="pre-check failed against the reference: not "
                    "timed" if not result.kernel_problem else "pre-check failed: not timed")
    try:
        with hook.context(backend):
            timed = hook.program(impl, case, backend, settings.mode)
            inputs = call_inputs(case, timed, backend)
            args = inputs(0)
            count = timed_kernels(timed, args)
            start = time.perf_counter()
            compiled = jax.jit(timed.fn).lower(args).compile()
            compile_s = time.perf_counter() - start
            del args
            calls = time_calls(compiled, inputs, warmup=settings.warmup,
                               iters=settings.iters, max_seconds=settings.max_seconds)
            memory = memory_of(compiled, backend)
    except Exception as e:  # noqa: BLE001 - the timed program's failure is the result
        return _row(family, name, seq_len, settings, "ERROR", check, case=described,
                    kernels=kernels, reason=f"timed program raised {type(e).__name__}: "
                    f"{_first_line(e)}")
    timing = Timing.of(calls.samples, compile_s=compile_s, warmup=settings.warmup,
                       iters_requested=settings.iters)
    measured = dict(case=described, timing=timing, memory=memory, kernels=kernels,
                    timed_kernels=count)
    try:
        verdict = judge_timed(family, case, timed, backend, calls.kept)
    except Exception as e:  # noqa: BLE001 - an unjudgeable result is no result
        return _row(family, name, seq_len, settings, "ERROR", check, **measured,
                    reason=f"judging the timed results raised {type(e).__name__}: "
                    f"{_first_line(e)}")
    problems = [p for p in (verdict.text if not verdict.passed else "",
                            kernels_problem(family, impl, settings.mode, count)) if p]
    return _row(family, name, seq_len, settings, "FAIL" if problems else "OK", check,
                **measured, results=verdict.text, reason="; ".join(problems))


def _first_line(e: BaseException) -> str:
    return str(e).splitlines()[0][:300] if str(e) else ""


def bench_family(family: Family, settings: BenchSettings,
                 impl: Callable[..., Any] | None = None, impl_spec: str | None = None,
                 progress: Callable[[BenchRow], None] | None = None) -> list[BenchRow]:
    """Every length of ``settings`` for one family; a family that cannot run here (no
    hook, backend or mode unsupported) is ONE SKIP row saying why."""
    backend = settings.backend
    why = None
    if family.bench is None:
        why = "no benchmark hook (Family.bench)"
    elif backend.name not in family.backends:
        where = (", ".join(sorted(family.backends)) or
                 f"none here (needs {family.requires or family.summary})")
        why = f"cannot run on backend {backend.name!r}; it runs on {where}"
    elif settings.mode not in family.bench.modes:
        why = f"no {settings.mode!r} mode (it times {', '.join(sorted(family.bench.modes))})"
    if why is not None:
        name = impl_name(impl or family.kernel, impl_spec)
        row = _row(family, name, None, settings, "SKIP", "not run", reason=why)
        if progress:
            progress(row)
        return [row]
    rows = []
    for seq_len in settings.seq_lens:
        row = bench_one(family, seq_len, settings, impl, impl_spec)
        if progress:
            progress(row)
        rows.append(row)
    return rows
