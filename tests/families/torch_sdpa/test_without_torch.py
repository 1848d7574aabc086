"""Without torch (the main CI venv) the torch-sdpa family still registers, imports no torch,
and has no backend, so a run of every family skips it with the reason and a run of it alone
is a usage error naming the extra."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from kernel_harness import get_family
from kernel_harness.cli import main

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is not None,
                                reason="torch is importable here: the torch-sdpa family "
                                "has backends (tests/families/torch_sdpa/test_torch_sdpa.py)")


def test_the_family_registers_without_importing_torch():
    family = get_family("torch-sdpa")
    assert family.backends == frozenset()
    assert "torch is not importable" in family.summary
    assert "torch" not in sys.modules


def test_checking_it_without_torch_is_a_usage_error_naming_the_extra(capsys):
    assert main(["check", "torch-sdpa", "--profile", "dev"]) == 2
    assert "kernel-harness[torch]" in capsys.readouterr().err
