"""Tests of a kernel library's families: skipped, loudly, where the library is not
installed here; a failure on CI, whose set-up installs it (README's test command)."""

from __future__ import annotations

import os

import pytest

from kernel_harness.families import tpu_inference_loader as loader


def tpu_inference_installed_or_skip() -> None:
    """Returns where tpu-inference is installed; else skips (NOT TESTED) or, on CI, fails."""
    if loader.available():
        return
    why = f"tpu-inference is not installed ({loader.INSTALL}; README, 'Kernel libraries')"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI: {why}")
    pytest.skip(f"NOT TESTED: {why}")
