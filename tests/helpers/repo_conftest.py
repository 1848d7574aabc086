"""The repository's conftest.py loaded as a module of its own (its lists: BOTH_STACKS,
SECOND_STACK_GOLDENS, TRITON_OPS_TESTS...), for the tests that check them."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_repo_conftest() -> ModuleType:
    """A fresh module executed from ``ROOT/conftest.py`` (not the one pytest loaded)."""
    spec = importlib.util.spec_from_file_location("_kh_repo_conftest", ROOT / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
