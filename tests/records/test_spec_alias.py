"""``kernel_harness.spec`` (the records floor's old name) still imports, as the same modules."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest


def test_old_module_names_are_the_records_modules_with_a_deprecation_warning() -> None:
    # A fresh interpreter: the warning is raised once, at the alias's first import.
    code = (
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        "    import kernel_harness.spec.config as old\n"
        "    from kernel_harness.spec.family import Family as OldFamily\n"
        "import kernel_harness.spec as spec\n"
        "import kernel_harness.records.config as new\n"
        "from kernel_harness.records.family import Family\n"
        "assert old is new and OldFamily is Family\n"
        "assert spec.registry is importlib.import_module('kernel_harness.records.registry')\n"
        "messages = [str(w.message) for w in seen if w.category is DeprecationWarning]\n"
        "assert any('kernel_harness.records' in m for m in messages), messages\n"
        "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", "import importlib\n" + code],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_name_that_never_existed_is_still_an_error() -> None:
    with warnings.catch_warnings():  # raised at the first import only: the test above's
        warnings.simplefilter("ignore", DeprecationWarning)
        spec = importlib.import_module("kernel_harness.spec")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("kernel_harness.spec.no_such_module")
    with pytest.raises(AttributeError, match="now 'kernel_harness.records'"):
        spec.no_such_name  # noqa: B018 (the attribute access is the test)
