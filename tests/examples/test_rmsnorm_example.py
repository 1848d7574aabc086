"""The out-of-tree example family (``examples/rmsnorm_family``) works like a built-in one.

It is found through its ``kernel_harness.families`` entry point (a dist-info written from
the example's own pyproject.toml, as pip would install it) and through ``--family-module``;
``check --profile ci`` passes on it and fails on each planted bug, and a printed repro
command finds the family again.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from kernel_harness import cli
from kernel_harness.core.errors import UsageError
from kernel_harness.records import registry

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rmsnorm_family"
MODULE = "rmsnorm_family.family"


@pytest.fixture
def example_on_path(monkeypatch):
    """The example importable, and the registry's module state isolated from other tests."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.setattr(registry, "_from_modules", {})
    monkeypatch.setattr(registry, "_loaded_modules", set())
    monkeypatch.delenv(registry.FAMILY_MODULES_ENV, raising=False)


def _fake_install(site: Path) -> None:
    """What pip leaves behind for entry points: a dist-info with entry_points.txt, written
    from the example's pyproject.toml (so the test checks the real declaration)."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    group = project["entry-points"][registry.ENTRY_POINT_GROUP]
    info = site / "kernel_harness_rmsnorm_example-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
    )
    lines = [f"[{registry.ENTRY_POINT_GROUP}]", *(f"{k} = {v}" for k, v in group.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


def _cli(site: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(EXAMPLE)])}
    env.pop(registry.FAMILY_MODULES_ENV, None)
    return subprocess.run([sys.executable, "-m", "kernel_harness.cli", *argv],
                          capture_output=True, text=True, env=env, timeout=600)


def test_reference_matches_the_closed_form(example_on_path):
    from rmsnorm_family.cases import RmsNormCase
    from rmsnorm_family.reference import reference

    case = RmsNormCase(dtype="float32", seed=3, rows=8, hidden=128, block_rows=8, x_scale=1e-3)
    inputs = case.materialize()
    x, w, dy = (inputs[n].astype(np.float64) for n in ("x", "w", "dy"))
    r = 1 / np.sqrt((x * x).mean(-1, keepdims=True) + case.eps)
    g = dy * w
    want = {"y": x * r * w, "dx": r * g - x * r**3 * (g * x).mean(-1, keepdims=True),
            "dw": (dy * x * r).sum(0)}
    got = reference(case, inputs)
    for name, expected in want.items():
        np.testing.assert_allclose(got[name], expected, rtol=2e-4,
                                   atol=2e-5 * np.abs(expected).max())


@pytest.mark.slow
def test_installed_example_is_listed_passes_ci_and_its_planted_bug_fails(tmp_path):
    _fake_install(tmp_path / "site")
    listed = _cli(tmp_path / "site", "list")
    assert listed.returncode == 0, listed.stderr
    assert any(line.startswith("rmsnorm ") for line in listed.stdout.splitlines()), listed.stdout
    ok = _cli(tmp_path / "site", "check", "rmsnorm", "--profile", "ci")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "PASS: 2/2 properties passed on backend interpret" in ok.stdout  # + deterministic
    assert "multi-row-block=" in ok.stdout and "eps-sized-rows=" in ok.stdout
    bad = _cli(tmp_path / "site", "check", "rmsnorm", "--profile", "ci",
               "--impl", "rmsnorm_family.bugs:rmsnorm_forgets_projection")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "[kernel-harness] FAIL rmsnorm dx" in bad.stdout
    # Entry-point families need no --family-module in the repro command.
    repro = next(line for line in bad.stdout.splitlines() if "reproduce:" in line)
    assert "--family-module" not in repro and "kernel-harness repro rmsnorm" in repro


def test_family_module_check_fails_on_the_eps_bug_and_repro_finds_the_family(
    example_on_path, capsys
):
    code = cli.main(["check", "--no-isolate",
                     "rmsnorm", "--family-module", MODULE, "--profile", "ci",
                     "--max-examples", "20", "--property", "matches-reference",
                     "--impl", "rmsnorm_family.bugs:rmsnorm_eps_outside_sqrt"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "[kernel-harness] FAIL rmsnorm y" in out
    repro = next(line for line in out.splitlines() if "reproduce:" in line).split(": ", 1)[1]
    assert f"--family-module {MODULE}" in repro
    argv = shlex.split(repro)[1:]
    os.environ.pop(registry.FAMILY_MODULES_ENV, None)
    registry._from_modules.clear()  # a fresh command line: only the repro's own flags
    registry._loaded_modules.clear()
    assert cli.main(argv) == 1
    assert "FAIL rmsnorm y" in capsys.readouterr().out


@pytest.mark.parametrize(
    "module, message",
    [("no_such_module_q", "cannot import it"),
     ("rmsnorm_family.kernel", "defines no kernel_harness Family"),
     ("tests.examples.clashing_family", "clashes with the built-in family"),
     ("tests.examples.only_imports_builtin", "declares no Family of its own .* FAMILY")],
)
def test_bad_family_module_is_a_clear_error(example_on_path, module, message):
    with pytest.raises(UsageError, match=message):
        registry.load_family_modules([module])


def test_a_module_importing_a_builtin_registers_only_its_own(example_on_path):
    """Issue 56: the built-in family object imported into a user's module is the built-in,
    not a clash (and not registered twice)."""
    assert registry.load_family_modules(["tests.examples.extends_builtin_family"]) == ["my-sdpa"]
    assert registry.get_family("sdpa") is not registry.get_family("my-sdpa")


def test_family_module_reaches_every_command(example_on_path, capsys, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(EXAMPLE), *sys.path]))
    assert cli.main(["--family-module", MODULE, "list"]) == 0
    assert "rmsnorm" in capsys.readouterr().out
    # Out-of-tree families reach child processes through the environment.
    assert MODULE in os.environ[registry.FAMILY_MODULES_ENV].split(",")
    assert registry.family_target("rmsnorm") == f"{MODULE}:FAMILY"
    assert cli.main(["shard", "rmsnorm", "--family-module", MODULE]) == 0
    assert "rmsnorm    SKIP (rmsnorm has no traceable" in capsys.readouterr().out
    assert cli.main(["lower", "rmsnorm", "--family-module", MODULE]) == 2
    assert "rmsnorm has no traceable hook" in capsys.readouterr().err
