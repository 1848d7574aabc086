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


@contextlib.contextmanager
def forcing(params: Any) -> Iterator[None]:
    """Around forcing TPU interpret mode with ``params``: makes them
    :func:`settings_in_force` for the context's duration."""
    token = _IN_FORCE.set(repr(params))
    try:
        yield
    finally:
        _IN_FORCE.reset(token)


def settings_in_force() -> tuple[str | None, Any]:
    """What a program traced now depends on beyond its arguments: the forced TPU interpreter
    settings (None outside) and the default matmul precision."""
    return _IN_FORCE.get(), jax.config.jax_default_matmul_precision
