"""Backend names, their availability here, and how a kernel is asked to run on one.

This module is the one place that decides which backend runs. A backend that
is not available raises :class:`BackendUnavailable`; nothing substitutes a
different backend quietly. ``auto`` resolves to a concrete backend and the
result records why.

An implementation learns the backend it runs on in one way, whatever its family's call
looks like: :func:`current_backend` while the harness runs, traces or lowers it
(``interpret=current_backend().pallas_interpret()`` for a Pallas kernel of its own).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator
from typing import Any

import jax

from kernel_harness.core import compat

BACKEND_NAMES: tuple[str, ...] = ("auto", "interpret", "tpu-interpret", "tpu", "gpu")


class BackendUnavailable(RuntimeError):
    """The requested backend cannot run on this machine (the message says why)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Backend:
    """A concrete backend a kernel runs on.

    Attributes:
      name: one of ``interpret``, ``tpu-interpret``, ``tpu``, ``gpu``.
      platform: the jax platform the arrays live on (``cpu``, ``tpu``, ``gpu``).
      note: why this backend was chosen (e.g. what ``auto`` resolved to).
      schedule: TPU interpreter settings pinned for every kernel run on this backend
        (``dma_execution_mode``, ``random_seed``: the grid-order seed of parallel
        dimensions), sorted ``(field, value)`` pairs; they win over a case's own
        (:meth:`scheduled`). Empty: the interpreter's defaults and the case's draws.
    """

    name: str
    platform: str
    note: str = ""
    schedule: tuple[tuple[str, Any], ...] = ()

    def scheduled(self, **schedule: Any) -> Backend:
        """This backend with ``schedule`` pinned (see :attr:`schedule`); only the TPU
        interpreter has one: on another backend it is a usage error, never ignored."""
        if self.name != "tpu-interpret":
            raise BackendUnavailable(
                f"backend {self.name!r} has no TPU interpreter schedule to pin "
                f"({sorted(schedule)}); use --backend tpu-interpret")
        merged = {**dict(self.schedule), **schedule}
        return dataclasses.replace(self, schedule=tuple(sorted(merged.items())))

    @property
    def is_interpreted(self) -> bool:
        return self.name in ("interpret", "tpu-interpret")

    @property
    def device(self) -> jax.Device:
        return jax.devices(self.platform)[0]

    def pallas_interpret(self) -> Any:
        """The value to pass as a Pallas kernel's ``interpret=`` argument."""
        if self.name == "interpret":
            return True
        if self.name == "tpu-interpret":
            return compat.tpu_interpret_params(**dict(self.schedule))
        return False

    @contextlib.contextmanager
    def forcing_interpret(self, **schedule: Any) -> Iterator[None]:
        """Context for kernels with no ``interpret`` argument (e.g. TPU flash).

        ``schedule``: TPU interpreter settings a case draws (``dma_execution_mode``...),
        applied on the interpreted backends (the backend's own :attr:`schedule` wins); on a
        TPU the hardware schedules."""
        if self.name == "tpu":
            yield
        elif self.name == "tpu-interpret":
            params = compat.tpu_interpret_params(**{**schedule, **dict(self.schedule)})
            with compat.forced_tpu_interpret_mode(params):
                yield
        elif self.name == "interpret":
            # A TPU kernel without an interpret switch can only be interpreted
            # by the TPU interpreter; plain settings (no race detection, zeroed
            # scratch) keep it an ordinary functional run.
            params = compat.tpu_interpret_params(**{
                "detect_races": False, "uninitialized_memory": "zero",
                "num_cores_or_threads": 1, **schedule})
            with compat.forced_tpu_interpret_mode(params):
                yield
        else:
            raise BackendUnavailable(
                f"backend {self.name!r} cannot run a TPU kernel without an interpret switch"
            )


def _platform_present(platform: str) -> bool:
    try:
        return bool(jax.devices(platform))
    except RuntimeError:
        return False


def availability() -> dict[str, str | None]:
    """Maps each concrete backend name to ``None`` if usable here, else the reason not."""
    has_tpu = _platform_present("tpu")
    has_gpu = _platform_present("gpu")
    return {
        "interpret": None,
        "tpu-interpret": None,
        "tpu": None if has_tpu else "no TPU is attached to this machine",
        "gpu": None if has_gpu else "no GPU is attached to this machine",
    }


_CURRENT: contextvars.ContextVar[Backend | None] = contextvars.ContextVar(
    "kernel_harness_backend", default=None)


def current_backend() -> Backend:
    """The backend the harness is running, tracing or lowering an implementation for: what
    an ``--impl`` asks (``current_backend().pallas_interpret()`` is its Pallas kernel's
    ``interpret=``; ``tpu`` while ``lowers-for-tpu`` traces it). Outside a harness run a
    RuntimeError saying so."""
    backend = _CURRENT.get()
    if backend is None:
        raise RuntimeError(
            "kernel_harness.current_backend() was called outside a harness run: it answers "
            "only while the harness runs, traces or lowers an implementation")
    return backend


@contextlib.contextmanager
def running_on(backend: Backend) -> Iterator[Backend]:
    """:func:`current_backend` is ``backend`` inside the block (nested blocks restore the
    outer one)."""
    token = _CURRENT.set(backend)
    try:
        yield backend
    finally:
        _CURRENT.reset(token)


def resolve_backend(name: str, *, note: str | None = None) -> Backend:
    """Turns a backend name into a :class:`Backend`, or raises a clear error.

    ``auto`` picks ``tpu`` when a TPU is attached, else ``interpret``, and
    says so in :attr:`Backend.note`. ``note`` says where the name came from
    (``from --backend``, ``the default``); without it a named backend's note is
    ``requested explicitly``.
    """
    if name not in BACKEND_NAMES:
        raise ValueError(
            f"unknown backend {name!r}; choose one of: {', '.join(BACKEND_NAMES)}"
        )
    avail = availability()
    if name == "auto":
        why = "a TPU is attached" if avail["tpu"] is None else (
            "no TPU attached, using interpret on CPU")
        return Backend(name="tpu" if avail["tpu"] is None else "interpret",
                       platform="tpu" if avail["tpu"] is None else "cpu",
                       note=f"auto: {why}" + (f"; {note}" if note else ""))
    reason = avail[name]
    if reason is not None:
        raise BackendUnavailable(f"backend {name!r} is not available: {reason}")
    platform = {"interpret": "cpu", "tpu-interpret": "cpu", "tpu": "tpu", "gpu": "gpu"}[name]
    return Backend(name=name, platform=platform, note=note or "requested explicitly")
