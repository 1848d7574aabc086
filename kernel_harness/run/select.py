"""Explicit attention kernel selection: splash > flash > SDPA, never a silent fallback.

:func:`select_attention` walks the candidates in order for the backend it runs on and
returns the first usable one together with the reason every earlier candidate was
passed over; each decision is logged (logger ``kernel_harness.run.select``: a WARNING per
candidate passed over, an INFO for the choice). What the machine offers comes from a
:class:`Probe`, so tests can inject a missing module or a machine without a TPU.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import re
from collections.abc import Callable
from typing import Any

import jax

from kernel_harness.core.backends import BackendUnavailable

logger = logging.getLogger("kernel_harness.run.select")


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One attention kernel the selection may choose.

    Attributes:
      name: short name (``splash``).
      module, attr: the entry point, imported only when the candidate is considered.
      platforms: jax platforms it runs on as a compiled kernel.
      min_tpu_generation: oldest TPU generation it is selected for, or None.
    """

    name: str
    module: str
    attr: str
    platforms: frozenset[str]
    min_tpu_generation: int | None = None

    @property
    def entry(self) -> str:
        return f"{self.module}:{self.attr}"


#: The candidates in order of preference.
CANDIDATES: tuple[Candidate, ...] = (
    Candidate("splash", "jax.experimental.pallas.ops.tpu.splash_attention", "make_splash_mha",
              frozenset({"tpu"}), min_tpu_generation=3),
    Candidate("flash", "jax.experimental.pallas.ops.tpu.flash_attention", "flash_attention",
              frozenset({"tpu"})),
    Candidate("sdpa", "jax.nn", "dot_product_attention", frozenset({"cpu", "gpu", "tpu"})),
)


def _attached_platforms() -> frozenset[str]:
    found = set()
    for platform in ("cpu", "gpu", "tpu"):
        try:
            if jax.devices(platform):
                found.add(platform)
        except RuntimeError:
            pass
    return frozenset(found)


def _device_kind(platform: str) -> str:
    return jax.devices(platform)[0].device_kind


@dataclasses.dataclass(frozen=True)
class Probe:
    """What the selection asks of the machine (each callable is injectable).

    Attributes:
      platforms: the jax platforms with a device attached.
      default_platform: the platform jax computes on by default.
      device_kind: ``device_kind`` of a platform's first device (``"TPU v4"``).
      import_module: imports a module by name (raises ImportError if missing).
    """

    platforms: Callable[[], frozenset[str]] = _attached_platforms
    default_platform: Callable[[], str] = jax.default_backend
    device_kind: Callable[[str], str] = _device_kind
    import_module: Callable[[str], Any] = importlib.import_module


@dataclasses.dataclass(frozen=True)
class Selection:
    """The chosen kernel and why.

    Attributes:
      kernel: the chosen candidate's name.
      entry: its entry point, ``module:attr``.
      platform: the platform selected for (``tpu``, ``gpu``, ``cpu``).
      device_kind: that platform's device kind.
      reason: why the chosen candidate qualifies.
      passed_over: ``(candidate, reason)`` for every better candidate not chosen.
      note: how the backend was resolved.
    """

    kernel: str
    entry: str
    platform: str
    device_kind: str
    reason: str
    passed_over: tuple[tuple[str, str], ...]
    note: str = ""
    function: Callable[..., Any] | None = dataclasses.field(default=None, compare=False,
                                                            repr=False)


def tpu_generation(device_kind: str) -> int | None:
    """The TPU generation in a device kind (``"TPU v5 lite"`` -> 5, ``"TPU7x"`` -> 7)."""
    m = re.search(r"TPU\s*v?(\d+)", device_kind, re.IGNORECASE)
    return int(m.group(1)) if m else None


def _resolve_platform(backend: str | None, probe: Probe) -> tuple[str, str]:
    """``(platform, note)`` for a backend name; unavailable hardware is an error."""
    if backend in (None, "auto"):
        platform = probe.default_platform()
        return platform, f"auto: jax's default platform is {platform}"
    if backend in ("interpret", "tpu-interpret"):
        return "cpu", (f"backend {backend!r} runs on the CPU; Pallas TPU kernels would only be "
                       "simulated there, so they are not selected")
    if backend not in ("cpu", "gpu", "tpu"):
        raise ValueError(f"unknown backend {backend!r}; choose one of: auto, interpret, "
                         "tpu-interpret, tpu, gpu, cpu")
    if backend not in probe.platforms():
        raise BackendUnavailable(f"cannot select for backend {backend!r}: no {backend} device "
                                 "is attached")
    return backend, "requested explicitly"


def _why_not(candidate: Candidate, platform: str, device_kind: str,
             probe: Probe) -> tuple[str | None, Any]:
    """``(reason it cannot be used or None, the loaded entry point)``."""
    if platform not in candidate.platforms:
        where = " or ".join(sorted(candidate.platforms))
        return f"runs only on {where}; this backend is {platform}", None
    if candidate.min_tpu_generation is not None and platform == "tpu":
        gen = tpu_generation(device_kind)
        if gen is None:
            return f"cannot tell the TPU generation from device kind {device_kind!r}", None
        if gen < candidate.min_tpu_generation:
            return (f"needs TPU v{candidate.min_tpu_generation} or newer; this is "
                    f"{device_kind!r}"), None
    try:
        module = probe.import_module(candidate.module)
    except ImportError as e:
        return f"module {candidate.module} cannot be imported ({e})", None
    fn = getattr(module, candidate.attr, None)
    if fn is None:
        return f"module {candidate.module} has no {candidate.attr!r}", None
    return None, fn


def select_attention(
    backend: str | None = None,
    *,
    probe: Probe | None = None,
    candidates: tuple[Candidate, ...] = CANDIDATES,
) -> Selection:
    """Chooses the attention kernel for ``backend`` (None/``auto``: jax's default platform).

    Order: splash (TPU v3+), flash (TPU), SDPA (anywhere). Returns the first usable
    candidate with the reason each earlier one was passed over, and logs both.

    Raises:
      ValueError: unknown backend name.
      BackendUnavailable: ``tpu``/``gpu`` requested but not attached.
      RuntimeError: no candidate is usable (never a silent fallback).
    """
    probe = Probe() if probe is None else probe
    platform, note = _resolve_platform(backend, probe)
    device_kind = probe.device_kind(platform) if platform in probe.platforms() else "?"
    passed: list[tuple[str, str]] = []
    for candidate in candidates:
        reason, fn = _why_not(candidate, platform, device_kind, probe)
        if reason is not None:
            passed.append((candidate.name, reason))
            logger.warning("attention kernel %s passed over on %s (%s): %s",
                           candidate.name, platform, device_kind, reason)
            continue
        why = f"first usable candidate on {platform} ({device_kind})"
        if candidate.min_tpu_generation is not None:
            why += f", TPU v{candidate.min_tpu_generation}+ satisfied"
        selection = Selection(
            kernel=candidate.name, entry=candidate.entry, platform=platform,
            device_kind=device_kind, reason=why, passed_over=tuple(passed), note=note,
            function=fn,
        )
        logger.info("attention kernel selected: %s (%s) on %s (%s)", candidate.name,
                    candidate.entry, platform, device_kind)
        return selection
    detail = "; ".join(f"{n}: {r}" for n, r in passed)
    raise RuntimeError(f"no attention kernel is usable on {platform}: {detail}")


def format_selection(sel: Selection) -> str:
    """Multi-line text for ``kernel-harness select``: the choice, why, what was passed over."""
    lines = [
        f"attention kernel: {sel.kernel} ({sel.entry})",
        f"  backend: {sel.platform} ({sel.device_kind}); {sel.note}".rstrip("; "),
        f"  chosen because: {sel.reason}",
    ]
    if sel.passed_over:
        lines += [f"  passed over {name}: {why}" for name, why in sel.passed_over]
    else:
        lines.append("  passed over: none")
    return "\n".join(lines)
