"""jax's process-wide configuration (``jax.config.values``: every option's global value, not
a context manager's thread-local one), read and put back. An implementation that sets one
(``jax.config.update("jax_default_matmul_precision", "bfloat16")``) changes every program
the user runs after it; the harness names that and restores the value (round 7 of the
adversarial set)."""

from __future__ import annotations

from typing import Any

import jax


def snapshot() -> dict[str, Any]:
    """Every option's global value now."""
    return dict(jax.config.values)


def changed_since(before: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(option, before, now)`` for each option whose global value differs from
    ``before``."""
    now = jax.config.values
    return [(k, before.get(k), now.get(k)) for k in sorted(set(before) | set(now))
            if before.get(k) is not now.get(k) and before.get(k) != now.get(k)]


def restore(changes: list[tuple[str, Any, Any]]) -> None:
    """Puts each changed option back to its value before."""
    for option, before, _ in changes:
        jax.config.update(option, before)
