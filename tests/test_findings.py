"""findings/ stays true: every finding's script still exits as its finding.json says.

Each folder under ``findings/`` (and ``findings/fixed/``) holds ``FINDING.md``,
``finding.json`` (``script``, ``expect_exit``, ``kind``, ``requires``: modules the script
imports besides jax and numpy, ``checked_on``: the versions the exit status was seen on)
and the script. The script runs in a clean interpreter where kernel_harness cannot be
imported. On a stack whose jax (or required library) version is not among
``checked_on`` the test is skipped with that reason: run the script there and add the
version. When upstream fixes a finding its test fails: move the folder to
``findings/fixed/`` and record the fixing version.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
from pathlib import Path

import pytest

from tests.helpers.standalone import CRASHED, run_standalone

ROOT = Path(__file__).resolve().parent.parent
FINDINGS = ROOT / "findings"
FOLDERS = sorted(p.parent for p in FINDINGS.glob("*/finding.json")) + sorted(
    p.parent for p in (FINDINGS / "fixed").glob("*/finding.json")
)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def test_there_are_findings() -> None:
    names = {p.name for p in FOLDERS}
    assert {"gpu-mha-causal-q-longer-than-kv", "gpu-mha-backward-non-dividing-blocks",
            "splash-local-mask-negative-window", "splash-mask-shape-unclear-error",
            "flash-bias-before-sm-scale", "tokamax-sdpa-padding-rows",
            "ejkernel-xla-flash-bias-grad-zero",
            "ejkernel-pallas-flash-pltpu-repeat-missing"} <= names


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_finding_is_complete_and_linked(folder: Path) -> None:
    meta = json.loads((folder / "finding.json").read_text())
    assert (folder / meta["script"]).is_file()
    # 2: an exported script whose kernel raises (a crash finding)
    assert meta["expect_exit"] in (0, 1, 2)
    assert meta["checked_on"]["jax"], "name the jax versions the exit status was seen on"
    text = (folder / "FINDING.md").read_text()
    assert "**Kind:**" in text and "Expected" in text
    script = (folder / meta["script"]).read_text()
    imports_harness = re.search(r"^\s*(import|from)\s+kernel_harness", script, re.MULTILINE)
    assert not imports_harness, "a finding's script must not import the harness"
    rel = folder.relative_to(ROOT).as_posix()
    assert f"({rel}/)" in (ROOT / "README.md").read_text(), f"README must link {rel}/"
    # The manual cannot link outside docs/ (mkdocs checks its links), so it names the folder.
    manual = (ROOT / "docs" / "findings.md").read_text()
    assert f"`{rel}/`" in manual, f"docs/findings.md must name {rel}/"


def exit_mismatch(folder: Path) -> str | None:
    """None when the folder's script exits as its finding.json says, else why not."""
    meta = json.loads((folder / "finding.json").read_text())
    done = run_standalone(folder / meta["script"])
    if done.returncode == meta["expect_exit"]:
        return None
    return (
        f"{folder.name}: expected exit {meta['expect_exit']}, got {done.returncode}; if "
        f"upstream fixed it, move the folder to findings/fixed/ with the fixing version\n"
        f"{done.stdout}\n{done.stderr[-2000:]}"
    )


@pytest.mark.nightly  # the libraries' kernels still have their bugs: kernels, not harness
@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_finding_still_exits_as_stated(folder: Path) -> None:
    meta = json.loads((folder / "finding.json").read_text())
    for module in meta["requires"]:
        if importlib.util.find_spec(module) is None:
            where = meta.get("install", f"the Python 3.12 stack with `pip install {module}`")
            pytest.skip(f"{folder.name} needs {module} ({where}); not installed here")
    for dist, versions in meta["checked_on"].items():
        have = _version(dist)
        if have not in versions:
            pytest.skip(f"{folder.name} was checked on {dist} {versions}; this stack has "
                        f"{dist} {have}: run {meta['script']} here and add the version")
    problem = exit_mismatch(folder)
    assert problem is None, problem


def test_a_fixed_finding_fails_its_check(tmp_path: Path) -> None:
    """A planted 'fixed upstream' finding: the script now exits 0 where 1 was stated."""
    (tmp_path / "finding.json").write_text(json.dumps(
        {"script": "repro.py", "expect_exit": 1, "requires": [], "checked_on": {"jax": []}}))
    (tmp_path / "repro.py").write_text("import sys\nprint('fixed')\nsys.exit(0)\n")
    problem = exit_mismatch(tmp_path)
    assert problem is not None and "expected exit 1, got 0" in problem
    (tmp_path / "repro.py").write_text("import sys\nsys.exit(1)\n")
    assert exit_mismatch(tmp_path) is None
    # The clean interpreter hides the harness from the scripts, too.
    (tmp_path / "repro.py").write_text("import kernel_harness\n")
    problem = exit_mismatch(tmp_path) or ""
    assert f"got {CRASHED}" in problem and "ModuleNotFoundError" in problem
