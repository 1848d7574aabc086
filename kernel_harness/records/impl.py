"""Loading an implementation named ``MODULE:ATTR`` (``--impl``, ``--kh-impl``)."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

from kernel_harness.core.errors import UsageError


def load_impl(spec: str) -> Callable[..., Any]:
    """Imports ``MODULE:ATTR`` (the working directory is importable) and returns the
    callable, or raises :class:`~kernel_harness.core.errors.UsageError`."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"--impl must look like MODULE:ATTR, got {spec!r}")
    if os.getcwd() not in sys.path:  # like `python -m`: the author's working tree is importable
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - any import failure is the user's to see
        raise UsageError(f"--impl {spec}: cannot import {module_name!r}: {e}") from None
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"--impl {spec}: module {module_name!r} has no {attr!r}") from None
    if not callable(obj):
        raise UsageError(f"--impl {spec}: {attr!r} is a {type(obj).__name__}, not callable")
    return obj
