"""Where goldens live: --golden-dir > $KERNEL_HARNESS_GOLDEN_DIR > golden-dir of the user's
pyproject.toml > the built-in families' shipped goldens (the checkout's golden/, else the
installed package data, never written) > ./golden; and the wheel carries golden/."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from kernel_harness import cli
from kernel_harness.core.backends import resolve_backend
from kernel_harness.records.registry import get_family
from kernel_harness.regression import gate, golden
from kernel_harness.regression.golden import location

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def clean(monkeypatch, tmp_path):
    """No env var, and a working directory with no configuration."""
    monkeypatch.delenv(location.GOLDEN_DIR_ENV, raising=False)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    return tmp_path


@pytest.fixture
def installed(clean, monkeypatch):
    """As from a wheel: no checkout beside the package, the goldens as package data."""
    monkeypatch.setattr(location, "CHECKOUT", clean / "no-checkout" / "golden")
    monkeypatch.setattr(location, "PACKAGED", REPO / "golden")
    return clean


def test_resolution_order(clean, monkeypatch):
    assert location.resolve("splash") == location.GoldenRoot(
        path=location.CHECKOUT, source="the source checkout's golden/")
    assert location.resolve("my-family") == location.GoldenRoot(
        path=Path("golden"), source="the default ./golden")
    (clean / "cwd" / "pyproject.toml").write_text("[tool.kernel-harness]\ngolden-dir = 'g'\n")
    configured = location.resolve("splash")
    assert configured.path == (clean / "cwd" / "g").resolve()
    assert configured.source.startswith("golden-dir in ") and configured.writable
    monkeypatch.setenv(location.GOLDEN_DIR_ENV, str(clean / "env"))
    assert location.resolve("my-family").path == clean / "env"
    assert location.resolve("my-family", clean / "flag").path == clean / "flag"


def test_installed_goldens_are_found_but_never_written(installed):
    where = location.resolve("splash")
    assert where.path == REPO / "golden" and not where.writable
    assert golden.load_manifest(get_family("splash"))  # read from the package data
    with pytest.raises(golden.GoldenError, match="never written; record into your own "
                                                 "directory with --golden-dir DIR"):
        golden.writable_root("splash")
    assert golden.writable_root("splash", installed / "mine") == installed / "mine"


@pytest.mark.parametrize("argv", [
    ["golden", "record", "splash", "--case", "x"],
    ["golden", "add", "splash", "pinned", "--case", "{}"],
])
def test_recording_into_the_installed_package_is_a_usage_error(installed, argv, capsys):
    before = sorted(p.name for p in (REPO / "golden" / "splash").iterdir())
    assert cli.main(argv) == 2
    assert "the goldens installed with kernel-harness" in capsys.readouterr().err
    assert sorted(p.name for p in (REPO / "golden" / "splash").iterdir()) == before


def test_gate_record_refuses_the_installed_baseline(installed):
    with pytest.raises(gate.GateError, match="never written"):
        gate.record(get_family("splash"), resolve_backend("interpret"),
                    path=gate.default_path("splash"))


def test_a_missing_manifest_says_where_the_root_came_from(clean, capsys):
    assert cli.main(["golden", "check", "splash", "--golden-dir", str(clean / "empty")]) == 1
    out = capsys.readouterr().out
    assert "(golden root from --golden-dir)" in out
    assert f"splash: goldens in {clean / 'empty'} (--golden-dir)" in out


def test_the_wheel_carries_every_golden_file():
    """kernel_harness/_golden_data links to golden/, and pyproject's package-data patterns
    match every file there (a new kind of file would otherwise be left out of the wheel)."""
    link = REPO / "kernel_harness" / "_golden_data"
    assert link.is_symlink() and link.resolve() == (REPO / "golden").resolve()
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = data["tool"]["setuptools"]["package-data"]["kernel_harness._golden_data"]
    files = {p for p in (REPO / "golden").rglob("*") if p.is_file()}
    shipped = {p for pat in patterns for p in (REPO / "golden").glob(pat)}
    assert files and not files - shipped, f"not shipped in the wheel: {files - shipped}"


@pytest.mark.triton_ops
def test_a_user_golden_root_without_a_builtin_family_points_at_the_shipped_ones(
        installed, capsys):
    """A user's golden-dir holds their own families: checking a built-in family there
    finds nothing, and the error names the shipped goldens and the flag that reads them."""
    (installed / "cwd" / "pyproject.toml").write_text(
        "[tool.kernel-harness]\ngolden-dir = 'golden'\n")
    assert cli.main(["golden", "check", "gpu-softmax"]) == 1
    out = capsys.readouterr().out
    assert ("the goldens installed with kernel-harness has gpu-softmax's: "
            f"`--golden-dir {REPO / 'golden'}`") in out
    assert cli.main(["golden", "check", "gpu-softmax", "--golden-dir",
                     str(REPO / "golden")]) == 0
