"""Run a script in a clean interpreter where kernel_harness cannot be imported.

``python -I`` (no PYTHONPATH, no user site, no script directory on sys.path) plus a
``sys.meta_path`` finder that refuses ``kernel_harness`` (the editable install would
otherwise still find it); ``extra_path`` (e.g. a temp folder holding a planted kernel)
is the only addition to sys.path. A script that raises exits with :data:`CRASHED`, so an
import error or a changed API is never mistaken for a finding's deliberate exit 1.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

#: Exit status of a script that raised instead of exiting (Python's own would be 1).
CRASHED = 3

_BOOT = r"""
import importlib.abc, runpy, sys
CRASHED = 3

class _Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "kernel_harness" or name.startswith("kernel_harness."):
            raise ModuleNotFoundError(f"kernel_harness is hidden from this script ({name})")
        return None

sys.meta_path.insert(0, _Blocked())
script, extra = sys.argv[1], sys.argv[2:]
sys.path[:0] = extra
sys.argv = [script]
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit:
    raise
except BaseException:  # a crash is not a finding's "exit 1": say so with its own status
    import traceback
    traceback.print_exc()
    sys.exit(CRASHED)
"""

#: What a clean run proves first: the package really is hidden.
_PROBE = r"""
try:
    import kernel_harness
except ModuleNotFoundError:
    raise SystemExit(0)
raise SystemExit(3)
"""


def run_standalone(
    script: Path, *, extra_path: Path | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Runs ``script`` with kernel_harness hidden; returns the finished process."""
    extra = [str(extra_path)] if extra_path else []
    return subprocess.run(
        [sys.executable, "-I", "-c", _BOOT, str(script), *extra],
        capture_output=True, text=True, timeout=timeout, cwd=script.parent,
    )


def harness_hidden(tmp: Path) -> bool:
    """Whether the clean interpreter of :func:`run_standalone` really cannot import
    kernel_harness (checked by running a probe script through it)."""
    probe = tmp / "probe_hidden.py"
    probe.write_text(_PROBE)
    return run_standalone(probe).returncode == 0
