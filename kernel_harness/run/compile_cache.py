"""A persistent compilation cache for harness runs (JAX's own), in a harness-owned directory.

Almost all of an example's time on CPU is compiling: each static configuration compiles the
kernel's forward+vjp program (Pallas interpret mode lowers the kernel to plain XLA) and the
reference. JAX's persistent compilation cache stores compiled executables on disk, so a rerun
(CI rerun, an edit-check loop, a nightly rerun) loads instead of compiling.

Keying, and why an edited kernel never reuses a stale program: JAX keys an entry by a hash of
the lowered program (the serialized StableHLO/HLO module, which is the traced kernel itself),
the compile options, the backend and the jax/jaxlib versions. Editing a kernel's source changes
the program it traces to, hence the key (``tests/run/test_compile_cache.py`` edits a toy
Pallas kernel and sees a miss). Nothing is keyed by file names or times.

What cannot be cached: programs with host callbacks. ``--backend tpu-interpret`` runs the
kernel through TPU interpret mode, whose every memory access and race check is a Python
callback into the interpreter; the callbacks are baked into the program as pointers to live
Python objects, so JAX refuses to write such programs to the cache (they recompile every run).
The same holds for any kernel using ``jax.debug.print`` or ``io_callback``.

Location: ``$KERNEL_HARNESS_COMPILE_CACHE`` or ``--compile-cache DIR``; ``off`` (or an empty
value) disables it. Default ``$XDG_CACHE_HOME/kernel-harness/jax-compile-cache`` (``~/.cache``
when unset). Enabling is explicit (the CLI does it); importing the library changes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax

ENV_VAR = "KERNEL_HARNESS_COMPILE_CACHE"
OFF = ("off", "none", "0", "")

#: Entries compiling faster than this are not written. JAX's default (1 s) would skip many
#: CPU interpret programs of small configurations (0.2-1 s each); far below this are the
#: thousands of eager single-op programs the references run, which cost more to store than to
#: recompile.
MIN_COMPILE_SECONDS = 0.2


def default_dir() -> Path:
    """``$XDG_CACHE_HOME/kernel-harness/jax-compile-cache`` (``~/.cache`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernel-harness" / "jax-compile-cache"


def resolve(flag: str | None) -> Path | None:
    """The cache directory from ``--compile-cache`` (first) or the environment variable
    (then), the default otherwise; None when disabled."""
    value = flag if flag is not None else os.environ.get(ENV_VAR)
    if value is None:
        return default_dir()
    if value.strip().lower() in OFF:
        return None
    return Path(value).expanduser()


def enable(flag: str | None) -> str:
    """Turns the persistent cache on (or leaves it off) for this process; returns a
    one-line description for the run's header. Call before anything compiles: JAX decides
    once per process whether the cache is used."""
    path = resolve(flag)
    if path is None:
        return "compile cache off"
    path.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return f"compile cache {path}"


__all__ = ["ENV_VAR", "MIN_COMPILE_SECONDS", "default_dir", "enable", "resolve"]
