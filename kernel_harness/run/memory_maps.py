"""Keeps a long run under the kernel's limit on memory mappings.

Every program XLA compiles for the CPU holds a few memory mappings for as long as jax
caches it. A run that compiles thousands of static configurations in one process (the
harness's own test suite in one pytest-xdist worker; a nightly ``check`` of every family)
passes Linux's ``vm.max_map_count`` (65530 by default) and LLVM then dies with a
segmentation fault inside the next compile, with no report: measured here, an xdist worker
grew by about 50 mappings a second and crashed 17 minutes in. :func:`relieve` drops jax's
compiled programs once a process holds half the limit; they are recompiled (or read from
the persistent compile cache) when next needed, and results do not change.
"""

from __future__ import annotations

import functools
import gc
from pathlib import Path

#: The fraction of ``vm.max_map_count`` at which compiled programs are dropped.
THRESHOLD_FRACTION = 0.5

_MAPS = Path("/proc/self/maps")
_LIMIT = Path("/proc/sys/vm/max_map_count")


def mapping_count() -> int | None:
    """This process's number of memory mappings (None where /proc does not say)."""
    try:
        with _MAPS.open("rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return None


@functools.cache
def mapping_limit() -> int | None:
    """The kernel's per-process limit on mappings (None where /proc does not say); read
    once per process, since :func:`relieve` runs before every kernel call."""
    try:
        return int(_LIMIT.read_text())
    except (OSError, ValueError):
        return None


def relieve(*, fraction: float = THRESHOLD_FRACTION) -> bool:
    """Clears jax's caches of compiled programs when this process holds more than
    ``fraction`` of the mapping limit; returns whether it did."""
    count, limit = mapping_count(), mapping_limit()
    if count is None or limit is None or count <= fraction * limit:
        return False
    import jax

    jax.clear_caches()
    gc.collect()
    return True
