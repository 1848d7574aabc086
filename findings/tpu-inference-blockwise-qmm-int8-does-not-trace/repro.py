#!/usr/bin/env python3
"""tpu-inference 0.32.0 blockwise quantized matmul with int8 weights and int8 activations
does not trace (hand-written for kernel-harness's finding; needs jax, numpy and
tpu-inference, not the harness).

Exit 1: tracing the kernel raises the dtype error (the finding holds); 0: it traces.
"""
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax
import jax.numpy as jnp


"""Loading tpu-inference's kernel modules without running its package ``__init__``.

tpu-inference (vLLM's TPU backend) ships its Pallas kernels under
``tpu_inference.kernels``; importing them the ordinary way runs ``tpu_inference/__init__.py``
(which loads vLLM's engine modules) and ``tpu_inference.logger`` (which imports vLLM). A
kernel check needs neither: it is installed ``pip install --no-deps tpu-inference==0.32.0``
(its own requirements pin jax 0.11.2, torch, transformers and vLLM). :func:`kernel_module`
imports one kernel module with the two packages as plain namespaces and the logger as a
standard-library one, in one place; where tpu-inference's real package is already imported
it is used as it is. The family modules load their kernels this way when they are imported:
a process that imports such a family and later ``import tpu_inference`` gets the bare
package (import tpu-inference first where its ``__init__`` is needed).
"""


import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import logging
import sys
import types
from pathlib import Path
from typing import Any

#: The release the families were written and checked against.
TESTED_VERSION = "0.32.0"
INSTALL = f"pip install --no-deps tpu-inference=={TESTED_VERSION}"


def available() -> bool:
    """Whether tpu-inference is installed (finds it; imports nothing). A process that
    blocks the import (``sys.modules["tpu_inference"] = None``) does not have it."""
    if "tpu_inference" in sys.modules:  # imported, or prepared (prepare_packages), or blocked
        return sys.modules["tpu_inference"] is not None
    try:
        return importlib.util.find_spec("tpu_inference") is not None
    except (ImportError, ValueError):
        return False


def installed_version() -> str | None:
    """The installed tpu-inference version, or None."""
    try:
        return importlib.metadata.version("tpu-inference")
    except importlib.metadata.PackageNotFoundError:
        return None


class _Logger(logging.LoggerAdapter):
    """tpu-inference's logger methods the kernels call, on a standard logger; the ``_once``
    ones say a message once per process, as vLLM's do (the kernels warn on every call that
    the CPU is no TPU generation they have tables for)."""

    _said: set[tuple[str, tuple[Any, ...]]] = set()

    def _once(self, level: int, msg: str, *args: Any) -> None:
        if (msg, args) not in self._said:
            self._said.add((msg, args))
            self.log(level, msg, *args)

    def warning_once(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self._once(logging.WARNING, msg, *args)

    def info_once(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self._once(logging.INFO, msg, *args)


def prepare_packages() -> None:
    """``tpu_inference`` and ``tpu_inference.kernels`` as bare packages, and its logger as a
    standard one (only where the real package is not imported already): after this, its
    kernel modules import, and ``importlib.util.find_spec`` finds them, without vLLM."""
    if "tpu_inference" in sys.modules:
        return
    spec = importlib.util.find_spec("tpu_inference")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"tpu-inference is not installed ({INSTALL})")
    root = Path(next(iter(spec.submodule_search_locations)))
    for name, path in (("tpu_inference", root), ("tpu_inference.kernels", root / "kernels")):
        package = types.ModuleType(name)
        package.__path__ = [str(path)]
        # A spec of its own: importlib.util.find_spec on a module without one raises.
        package.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        package.__spec__.submodule_search_locations = [str(path)]
        sys.modules[name] = package
    logger = types.ModuleType("tpu_inference.logger")
    logger.init_logger = lambda name: _Logger(logging.getLogger(name), {})  # type: ignore[attr-defined]
    sys.modules["tpu_inference.logger"] = logger


def kernel_module(name: str) -> types.ModuleType:
    """``tpu_inference.kernels.<name>`` (``quantized_matmul.kernel``), imported without the
    package's ``__init__``; ImportError naming the install command where it is missing."""
    prepare_packages()
    return importlib.import_module(f"tpu_inference.kernels.{name}")

_K = kernel_module("quantized_matmul.blockwise_kernel")
_T = kernel_module("quantized_matmul.tuned_block_sizes")

_K = kernel_module("quantized_matmul.blockwise_kernel")
_T = kernel_module("quantized_matmul.tuned_block_sizes")

n_batch, n_in, n_out, block = 8, 256, 256, 128
x = jax.ShapeDtypeStruct((n_batch, n_in), jnp.float32)
w_q = jax.ShapeDtypeStruct((n_out, n_in), jnp.int8)  # int8 weights, as the tuned table lists
w_scale = jax.ShapeDtypeStruct((n_in // block, 1, n_out), jnp.float32)


def call(x, w_q, w_scale):
    return _K.quantized_matmul_kernel(x, w_q, w_scale, block_size=block, x_q_dtype=jnp.int8,
                                      tuned_value=_T.TunedValue(8, 256, 256))


print(f"jax {jax.__version__}, tpu-inference {installed_version()}")
try:
    jax.eval_shape(call, x, w_q, w_scale)
except ValueError as e:
    print(f"FAIL: int8 x int8 does not trace: {type(e).__name__}: {str(e).strip()}")
    sys.exit(1)
print("PASS: int8 x int8 traces")
sys.exit(0)
