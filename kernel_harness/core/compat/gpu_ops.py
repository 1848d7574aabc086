"""jax's Pallas Triton ops (``jax.experimental.pallas.ops.gpu``), where this jax has them.

jax up to 0.12.0.1 ships ``attention``, ``decode_attention``, ``paged_attention``,
``layer_norm``, ``rms_norm`` and ``softmax`` there; jax 0.12.1 removed them (the Pallas
changelog had deprecated them in favour of tokamax) and keeps only the Mosaic GPU ops
(``*_mgpu``) in that package. The gpu-* families wrap exactly those six modules: they look
each one up here, so a family imports on any jax and has no backend where its module is
missing, saying why (:func:`gpu_ops_missing_reason`). This is the one place that knows it.
"""

from __future__ import annotations

import importlib
import types

import jax

#: The package of jax's Pallas GPU ops.
PACKAGE = "jax.experimental.pallas.ops.gpu"

#: The Pallas Triton ops of :data:`PACKAGE` the gpu-* families wrap (jax 0.12.1 removed them).
TRITON_OPS: tuple[str, ...] = (
    "attention", "decode_attention", "paged_attention", "layer_norm", "rms_norm", "softmax",
)

#: The newest jax that has them (the second stack's pin before 0.12.1).
LAST_JAX_WITH_TRITON_OPS = "0.12.0.1"

#: How to install that jax: CPU interpret mode, or an NVIDIA GPU (jax's ``cuda12`` extra).
INSTALL = (f'pip install "jax=={LAST_JAX_WITH_TRITON_OPS}" "jaxlib=={LAST_JAX_WITH_TRITON_OPS}" '
           f'("jax[cuda12]=={LAST_JAX_WITH_TRITON_OPS}" on an NVIDIA GPU)')


def gpu_op(name: str) -> types.ModuleType | None:
    """The module ``jax.experimental.pallas.ops.gpu.<name>`` (``"softmax"``), or None where
    this jax has no such module (jax >= 0.12.1 for the :data:`TRITON_OPS`).

    The module is imported, not copied: where ``kernel-harness mutate`` serves a mutated
    source through its import hook, the mutated module is the one returned. A module that is
    there but fails to import (one of its own imports missing) raises as it would anyway.
    """
    module = f"{PACKAGE}.{name}"
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        # Only the module itself (or a package above it) missing means "this jax has none".
        if e.name is not None and (module == e.name or module.startswith(f"{e.name}.")):
            return None
        raise


def missing_gpu_ops(names: tuple[str, ...] = TRITON_OPS) -> tuple[str, ...]:
    """Those of ``names`` (default: every one of :data:`TRITON_OPS`) this jax lacks."""
    return tuple(name for name in names if gpu_op(name) is None)


def gpu_ops_missing_reason(names: tuple[str, ...] = TRITON_OPS) -> str:
    """Why the ops ``names`` do not run here and what to do, as one sentence that reads after
    "needs" (``Family.requires``: ``kernel-harness list`` prints ``- (needs ...)``): the jax
    that has them, the modules the installed jax (its version named) lacks, that jax 0.12.1
    removed its Pallas Triton ops (deprecated for tokamax), and the install command. Names
    the modules of ``names`` this jax lacks (all of ``names`` where it lacks none)."""
    modules = ", ".join(f"{PACKAGE}.{name}" for name in missing_gpu_ops(names) or names)
    return (f"jax <= {LAST_JAX_WITH_TRITON_OPS}: the installed jax {jax.__version__} has no "
            f"{modules} (jax 0.12.1 removed its Pallas Triton ops, deprecated for tokamax); "
            f"{INSTALL}")
