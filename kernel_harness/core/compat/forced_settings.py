"""The TPU interpreter settings in force, which a traced program depends on beyond its
arguments (for the harness's own caches of traced programs).

jax keys its trace caches on ``pltpu.force_tpu_interpret_mode``'s settings (a config state);
the harness's cache of counted programs (:mod:`kernel_harness.run.kernel_count`: one trace
per configuration, counted and run) keyed on the call alone until 2026-12-05, when CI ran a
golden case on ``interpret`` (no race detection) and then the same configuration on
``tpu-interpret`` in one worker: the first program ran, and the race detector recorded no
access (the harness's guard raised; a drawn DMA schedule would have been as stale, silently).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import jax

_IN_FORCE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "kernel_harness_forced_interpret", default=None)
_PARAMS: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "kernel_harness_forced_interpret_params", default=None)


#: The attribute an exception raised under forced TPU interpret mode carries: the settings
#: (a crash report says the harness, not the kernel, chose that interpreter).
RAISED_UNDER = "kernel_harness_forced_interpret"


@contextlib.contextmanager
def forcing(params: Any) -> Iterator[None]:
    """Around forcing TPU interpret mode with ``params``: makes them
    :func:`settings_in_force` for the context's duration, and marks an exception raised
    inside with them (:data:`RAISED_UNDER`; the innermost forcing wins)."""
    token, kept = _IN_FORCE.set(repr(params)), _PARAMS.set(params)
    try:
        yield
    except Exception as error:
        if not hasattr(error, RAISED_UNDER):
            setattr(error, RAISED_UNDER, repr(params))
        raise
    finally:
        _IN_FORCE.reset(token)
        _PARAMS.reset(kept)


def params_in_force() -> Any:
    """The forced TPU interpreter's ``InterpretParams`` in force (None outside)."""
    return _PARAMS.get()


def raised_under(error: BaseException) -> str | None:
    """The forced TPU interpreter settings ``error`` was raised under, or None."""
    return getattr(error, RAISED_UNDER, None)


def settings_in_force() -> tuple[str | None, Any]:
    """What a program traced now depends on beyond its arguments: the forced TPU interpreter
    settings (None outside) and the default matmul precision."""
    return _IN_FORCE.get(), jax.config.jax_default_matmul_precision
