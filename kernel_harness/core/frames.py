"""Which source frames are plumbing, not kernel code, when a kernel's access, branch or
equation is attributed to a source line.

jax records the Python traceback of every traced equation. A jitted function that is
traced once keeps the traceback of that first trace, so the same kernel can carry the
frames of whichever caller traced it first: the adapter's call, or the harness's own
re-trace that counts the kernels (:mod:`kernel_harness.run.kernel_count`). Skipping the
harness's plumbing frames attributes a kernel to the same kernel and adapter lines either
way, so reviewed waivers (``run/waivers.json``) and coverage sites keep their names.
"""

from __future__ import annotations

#: Path fragments of plumbing: jax's internals, the harness's version layer and the
#: counting wrapper that re-traces an implementation.
PLUMBING = ("/jax/_src/", "/kernel_harness/core/compat/", "/kernel_harness/run/kernel_count.py")


def is_plumbing(file_name: str) -> bool:
    """Whether a frame of ``file_name`` is jax's or the harness's plumbing (not kernel or
    adapter code)."""
    name = file_name.replace("\\", "/")
    return any(p in name for p in PLUMBING)
