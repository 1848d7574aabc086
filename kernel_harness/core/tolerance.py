"""Tolerances as data, per (dtype, output), and the judging step.

A tolerance bounds the largest error relative to the output's scale (its
largest reference magnitude). Families hold a :class:`ToleranceTable`; the
numbers live there, with the reason for each, and nowhere else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from kernel_harness.core.compare import OutputStats


@dataclasses.dataclass(frozen=True, kw_only=True)
class Tolerance:
    """Largest allowed error as a fraction of the output's scale, and why."""

    max_rel_err: float
    reason: str = ""

    def __post_init__(self) -> None:
        if not 0 < self.max_rel_err < 1:
            raise ValueError(f"max_rel_err must be in (0, 1), got {self.max_rel_err}")


@dataclasses.dataclass(frozen=True)
class ToleranceTable:
    """Tolerances keyed by ``(dtype name, output name)``.

    Example: ``ToleranceTable({("float32", "out"): Tolerance(max_rel_err=2e-4)})``.
    """

    entries: Mapping[tuple[str, str], Tolerance]

    def lookup(self, dtype: str, output: str) -> Tolerance:
        """The tolerance for one output at one dtype; a missing entry is an error."""
        try:
            return self.entries[(dtype, output)]
        except KeyError:
            known = sorted(self.entries)
            raise KeyError(
                f"no tolerance for dtype={dtype!r} output={output!r}; known: {known}"
            ) from None

    def scaled(self, factor: float) -> ToleranceTable:
        """Every entry multiplied by ``factor`` (for implementations with a documented
        lower internal precision)."""
        return ToleranceTable(
            {
                key: dataclasses.replace(
                    tol, max_rel_err=min(tol.max_rel_err * factor, 0.999)
                )
                for key, tol in self.entries.items()
            }
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Verdict:
    """The judgement of one output: passed or not, with the reasons."""

    stats: OutputStats
    tolerance: Tolerance
    passed: bool
    problems: tuple[str, ...]


def judge(stats: OutputStats, tolerance: Tolerance) -> Verdict:
    """Decides whether ``stats`` are within ``tolerance``.

    Fails on any NaN/Inf the reference does not have, and on a max error
    relative to scale above ``tolerance.max_rel_err``.
    """
    problems: list[str] = []
    extra_nan = stats.nan_actual - stats.nan_expected
    extra_inf = stats.inf_actual - stats.inf_expected
    if extra_nan > 0:
        problems.append(f"{extra_nan} NaN not in the reference")
    if extra_inf > 0:
        problems.append(f"{extra_inf} Inf not in the reference")
    if not stats.max_rel_err <= tolerance.max_rel_err:
        problems.append(
            f"max rel err {stats.max_rel_err:.3g} > tolerance {tolerance.max_rel_err:.3g}"
        )
    return Verdict(stats=stats, tolerance=tolerance, passed=not problems, problems=tuple(problems))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToleranceOverride:
    """One ``--tolerance OUTPUT[:DTYPE]=X``: a new limit for one output (at one dtype,
    or at every dtype when ``dtype`` is None)."""

    output: str
    dtype: str | None
    max_rel_err: float

    def __str__(self) -> str:
        key = self.output if self.dtype is None else f"{self.output}:{self.dtype}"
        return f"{key}={self.max_rel_err:g}"


def merge_tolerances(
    table: ToleranceTable, overrides: Sequence[ToleranceOverride] = (), scale: float | None = None
) -> ToleranceTable:
    """The family's defaults, multiplied by ``scale``, then replaced by ``overrides``
    (later ones win); each changed entry's reason names the default it replaced.

    Pure: ``table`` is not changed. An override naming an output or dtype the table
    does not have, a non-positive scale, or no matching entry is a ValueError.
    """
    if scale is not None and not scale > 0:
        raise ValueError(f"tolerance scale must be positive, got {scale}")
    entries = dict(table.entries)
    if scale is not None:
        entries = {
            key: Tolerance(
                max_rel_err=min(tol.max_rel_err * scale, 0.999),
                reason=f"--tolerance-scale {scale:g} x default {tol.max_rel_err:g} ({tol.reason})",
            )
            for key, tol in entries.items()
        }
    outputs = sorted({o for _, o in table.entries})
    dtypes = sorted({d for d, _ in table.entries})
    for ov in overrides:
        if ov.output not in outputs:
            raise ValueError(f"--tolerance {ov}: no output {ov.output!r}; outputs: {outputs}")
        if ov.dtype is not None and ov.dtype not in dtypes:
            raise ValueError(f"--tolerance {ov}: no dtype {ov.dtype!r}; dtypes: {dtypes}")
        keys = [k for k in entries if k[1] == ov.output and ov.dtype in (None, k[0])]
        if not keys:
            raise ValueError(f"--tolerance {ov}: the table has no such entry")
        for key in keys:
            default = table.entries[key]
            entries[key] = Tolerance(
                max_rel_err=ov.max_rel_err,
                reason=f"--tolerance {ov} (default {default.max_rel_err:g}: {default.reason})",
            )
    return ToleranceTable(entries)
