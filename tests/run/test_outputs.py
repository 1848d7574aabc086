"""Output paths are checked before any work: an unwritable one is exit 2 with one line,
no traceback, within seconds (a nightly must not lose its results at the last second)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernel_harness.core.errors import UsageError
from kernel_harness.run.outputs import ensure_writable

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("paths,text", [
    ({"--json": "/proc/no/such/r.json"},
     "--json /proc/no/such/r.json: cannot write: No such file or directory (/proc/no)"),
    ({"--junit": "/proc/r.xml"}, "--junit /proc/r.xml: cannot write: "),
    ({"--plot-dir": "/proc/plots"}, "--plot-dir /proc/plots: cannot write: "),
    ({"--compile-cache": "/dev/null"}, "--compile-cache /dev/null: cannot write: not a folder"),
    ({"--json": "/"}, "--json /: cannot write: is a folder"),
])
def test_unwritable_paths_are_one_line_usage_errors(paths, text):
    with pytest.raises(UsageError) as e:
        ensure_writable(paths)
    assert str(e.value).startswith(text) and "\n" not in str(e.value)


def test_writable_paths_pass_and_leave_no_file_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNEL_HARNESS_COMPILE_CACHE", str(tmp_path / "cache"))
    ensure_writable({"--json": tmp_path / "deep" / "r.json", "--junit": None,
                     "--plot-dir": tmp_path / "plots", "--compile-cache": None})
    assert not (tmp_path / "deep" / "r.json").exists()  # its folder is made, not the file
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["cache", "deep", "plots"]
    ensure_writable({"--compile-cache": "off"})


def test_an_unwritable_cache_from_the_environment_is_named_so(monkeypatch):
    monkeypatch.setenv("KERNEL_HARNESS_COMPILE_CACHE", "/proc/cache")
    with pytest.raises(UsageError, match=r"^compile cache \(\$KERNEL_HARNESS_COMPILE_CACHE or "
                                         r"its default\) /proc/cache: cannot write: "):
        ensure_writable({"--compile-cache": None})


@pytest.mark.parametrize("argv", [
    ["bench", "hstu", "--json", "/proc/no/such/b.json"],
    ["gate", "hstu", "--compile-cache", "/proc/no/cache"],
    ["golden", "record", "hstu", "--golden-dir", "/proc/no/golden"],
    ["merge", "README.md", "--junit", "/proc/no/such/m.xml"],
    ["repro", "hstu", "--case", "{}", "--plot", "/proc/no/p.png"],
], ids=lambda a: a[0] + ("-" + a[1] if a[0] == "golden" else ""))
def test_commands_refuse_unwritable_outputs_before_any_work(argv):
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "kernel_harness.cli", *argv], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    seconds = time.monotonic() - start
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("kernel-harness: error: ") and ": cannot write: " in line
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert seconds < 60, seconds
