"""Simulated devices for collective kernels: a family whose cases run on a mesh
(``Family.devices``) needs that many devices on the backend's platform.

On a CPU, jax simulates host devices only if asked before it starts its backends. Front
ends that own their process (the CLI, the worker process) ask for
:data:`DEFAULT_CPU_DEVICES` at start (:func:`request_cpu_devices`) unless the user set a
count; a library call never does (installing the harness changes nothing for other tests).
Where a case needs more devices than the process has, :func:`require_devices` raises
:class:`DevicesUnavailable` saying how to start the process instead: never a smaller mesh.
"""

from __future__ import annotations

import functools
import math
import os

import jax
import numpy as np

from kernel_harness.core import compat
from kernel_harness.core.backends import BackendUnavailable
from kernel_harness.core.compat import mesh as compat_mesh
from kernel_harness.core.errors import UsageError

#: The simulated CPU devices a harness-owned process starts with: the most any built-in
#: family draws.
DEFAULT_CPU_DEVICES = 8
_FLAG = "--xla_force_host_platform_device_count"


class DevicesUnavailable(UsageError, BackendUnavailable):
    """A case needs more devices than this process has (the message says how to get them):
    a usage error where a family is named, a family not run (SKIP, with the reason) in an
    every-family run."""


def _count_set_by_user() -> bool:
    return _FLAG in os.environ.get("XLA_FLAGS", "") or compat_mesh.cpu_device_count_config() > 0


def request_cpu_devices(n: int = DEFAULT_CPU_DEVICES) -> bool:
    """Asks jax for ``n`` simulated CPU devices if it has not started its backends and the
    user set no count (``XLA_FLAGS`` or ``jax_num_cpu_devices``); returns whether it asked.
    Only for front ends that own their process."""
    if compat_mesh.backends_started() or _count_set_by_user():
        return False
    compat.set_cpu_device_count(n)
    return True


def require_devices(platform: str, n: int, what: str) -> list[jax.Device]:
    """The first ``n`` devices of ``platform``, or :class:`DevicesUnavailable` naming
    ``what`` needs them and how to start a process that has them."""
    have = jax.devices(platform)
    if len(have) >= n:
        return list(have[:n])
    fix = (f"start the process with XLA_FLAGS={_FLAG}={max(n, DEFAULT_CPU_DEVICES)} (or "
           f"jax.config.update('jax_num_cpu_devices', {max(n, DEFAULT_CPU_DEVICES)}) before "
           "jax first runs), or run it isolated (`kernel-harness check` does by default; "
           "isolate=True in kernel_harness.testing.check, --kh-isolate under pytest): the "
           "harness's own processes ask for "
           f"{DEFAULT_CPU_DEVICES}" if platform == "cpu" else
           f"run it on a host with {n} {platform} devices")
    raise DevicesUnavailable(f"{what} needs {n} {platform} devices; this process has "
                             f"{len(have)}: {fix}")


def device_mesh(platform: str, shape: tuple[int, ...], axes: tuple[str, ...],
                what: str) -> jax.sharding.Mesh:
    """A mesh of ``shape`` over ``platform``'s first devices, in order, named ``axes``
    (:func:`require_devices` for ``what``: never a smaller one), for a kernel run on it
    next (the TPU interpreter's programs traced on the same axes in another order are
    dropped first, on every jax: :func:`~kernel_harness.core.compat.mesh.before_mesh_call`)."""
    mesh = _mesh(platform, shape, axes, what)
    compat_mesh.before_mesh_call(mesh)
    return mesh


@functools.lru_cache(maxsize=32)
def _mesh(platform: str, shape: tuple[int, ...], axes: tuple[str, ...],
          what: str) -> jax.sharding.Mesh:
    found = require_devices(platform, math.prod(shape), what)
    return jax.sharding.Mesh(np.array(found).reshape(shape), axes)
