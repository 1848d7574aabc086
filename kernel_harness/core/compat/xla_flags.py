"""XLA flags whose existence depends on the installed jaxlib.

XLA aborts the whole process (``Unknown flag in XLA_FLAGS``, a native abort, no Python
exception) when ``XLA_FLAGS`` names a flag its build does not know, so a flag that exists in
one jaxlib and not in the next may only be set where it is known to exist. This module reads
the jaxlib version from the installed distribution's metadata and never starts jax's backend,
so it can be asked before XLA reads ``XLA_FLAGS``.
"""

from __future__ import annotations

from importlib import metadata

#: CPU flags that make XLA compile faster, by the jaxlib versions (major, minor) whose XLA was
#: checked to accept them.
#:
#: ``--xla_cpu_use_fusion_emitters=false``: XLA's older CPU loop emitters instead of the
#: fusion emitters. Interpret-mode Pallas kernels compile in about half the time (6 families'
#: first checks: 16.8 -> 7.4 s of backend compile, 26.8 -> 18.4 s of CPU, jaxlib 0.10.2,
#: 2026-12-01; compiling and running together took 31% less CPU). Fast-math stays off, but
#: an emitter chooses how a reduction is vectorized: on the first drawn case of 6 families,
#: 41 of 49 outputs came out bitwise equal and 8 differed by at most 1.6e-7 of their scale
#: (about a float32 ulp), far inside every tolerance. The XLA of jaxlib 0.10.0 and 0.10.2
#: accepts it; that of 0.11.2 and 0.12.0.1 no longer has the flag and aborts on it.
FAST_CPU_COMPILE_FLAGS: dict[tuple[int, int], tuple[str, ...]] = {
    (0, 10): ("--xla_cpu_use_fusion_emitters=false",),
    (0, 11): (),
    (0, 12): (),
}


def jaxlib_version() -> tuple[int, int] | None:
    """(major, minor) of the installed jaxlib, from its metadata; None when none is installed
    or its version does not parse."""
    try:
        parts = metadata.version("jaxlib").split(".")
        return int(parts[0]), int(parts[1])
    except (metadata.PackageNotFoundError, ValueError, IndexError):
        return None


def fast_cpu_compile_flags(version: tuple[int, int] | None = None) -> tuple[str, ...]:
    """The flags of :data:`FAST_CPU_COMPILE_FLAGS` for ``version`` (default: the installed
    jaxlib); none for a version not in the table, where a flag might abort the process."""
    return FAST_CPU_COMPILE_FLAGS.get(jaxlib_version() if version is None else version, ())
