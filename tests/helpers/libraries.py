"""Tests of a kernel library's families: skipped, loudly, where the library is not
installed here; a failure on CI, whose set-up installs it (README's test command)."""

from __future__ import annotations

import os
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
    return True
