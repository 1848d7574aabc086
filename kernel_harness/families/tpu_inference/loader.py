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

from __future__ import annotations

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
    """``tpu_inference`` and ``tpu_inference.kernels`` as bare packages, its logger as a
    standard one and its ``utils`` as stand-ins that raise when called (only where the real
    package is not imported already): after this, its kernel modules import, and
    ``importlib.util.find_spec`` finds them, without vLLM or torch."""
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
    utils = types.ModuleType("tpu_inference.utils")
    utils.__getattr__ = _unloaded_util  # type: ignore[attr-defined]
    sys.modules["tpu_inference.utils"] = utils


def _unloaded_util(name: str) -> Any:
    """``tpu_inference.utils.<name>`` in the bare package: the real module imports torch
    and vLLM, so its functions are stand-ins that fail loudly if a kernel calls one (the
    head_dim-64 RPA imports ``get_device_name`` for its tuned-block lookup, which the
    harness never reaches: it passes the case's blocks)."""
    if name.startswith("__"):
        raise AttributeError(name)

    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"tpu_inference.utils.{name} is not available: the harness loads "
                           "tpu-inference's kernels without tpu_inference.utils (it imports "
                           "torch and vLLM); pass the kernel's block sizes explicitly")

    return unavailable


def kernel_module(name: str) -> types.ModuleType:
    """``tpu_inference.kernels.<name>`` (``quantized_matmul.kernel``), imported without the
    package's ``__init__``; ImportError naming the install command where it is missing."""
    prepare_packages()
    return importlib.import_module(f"tpu_inference.kernels.{name}")
