"""Tests of a kernel library's families: skipped, loudly, where the library is not
installed here; a failure on CI, whose set-up installs it (README's test command)."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from kernel_harness.families.tpu_inference import loader


def tpu_inference_installed_or_skip() -> None:
    """Returns where tpu-inference is installed; else skips (NOT TESTED) or, on CI, fails."""
    if loader.available():
        return
    why = f"tpu-inference is not installed ({loader.INSTALL}; README, 'Kernel libraries')"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI: {why}")
    pytest.skip(f"NOT TESTED: {why}")


def library_missing(family: Any) -> bool:
    """Whether ``family`` lacks a backend because its kernel library is not installed (a
    CI failure), rather than because this jax lacks what the kernel calls (the head_dim-64
    RPA on jax 0.10.2: a skip, its ``requires`` says which jax)."""
    if "tpu-inference" in family.requires:
        return not loader.available()
    if "Python >= 3.12" in family.requires and sys.version_info < (3, 12):
        return False  # cannot be installed on this Python: a skip, its requires says so
    return True


def flywheel_installed_or_skip() -> None:
    """Returns where flywheel-tpu can be imported; else skips (NOT TESTED: on Python < 3.12
    it cannot be installed) or, on CI with Python >= 3.12, fails."""
    from kernel_harness.families.flywheel_tpu import library

    why = library.unavailable_reason()
    if why is None:
        return
    if os.environ.get("CI") == "true" and sys.version_info >= (3, 12):
        pytest.fail(f"CI: {why}")
    pytest.skip(f"NOT TESTED: {why}")


#: Why deltanet-tpu's tests skip on a stack without it.
DELTANET_NEEDS = ("deltanet-tpu needs Python >= 3.12 (it is installed --no-deps on the Python "
                  "3.12 stack from requirements/kernel-libraries.txt); this stack cannot "
                  "install it")


def deltanet_installed_or_skip() -> Any:
    """The ``deltanet_tpu`` module where it is installed; else skips, saying why."""
    return pytest.importorskip("deltanet_tpu", reason=DELTANET_NEEDS)
