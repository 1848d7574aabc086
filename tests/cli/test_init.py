"""``kernel-harness init NAME --kernel MODULE:FUNC [--op KIND]``: the skeleton of each kind
passes ``check NAME`` as written (found through the [tool.kernel-harness] table it writes),
a bug planted in its kernel fails it, a kernel without ``interpret=`` is called without it,
existing files are never overwritten, and bad input (an unknown kind too) is exit 2."""

from __future__ import annotations

import os
import string
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from kernel_harness import cli, resolve_backend
from kernel_harness.records import registry, scaffold_delta_rule
from kernel_harness.records.scaffold import OPS, TODO

NAME, KERNEL = "my-scale", "mykernels.scale:scale"


@pytest.fixture
def here(tmp_path, monkeypatch):
    """An empty working directory; the registry and sys.path restored afterwards."""
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(registry, "_from_modules", {})
    monkeypatch.setattr(registry, "_loaded_modules", set())
    monkeypatch.delenv(registry.FAMILY_MODULES_ENV, raising=False)
    yield project
    for name in [m for m in sys.modules if m.split(".")[0] in _GENERATED]:
        del sys.modules[name]


_GENERATED = ("my_scale_family", "other_family", "mykernels", "kh_init_user_ops",
              "my_delta_family", "kh_init_user_delta")


def _shipped(project: Path) -> set[str]:
    """The packages and modules ``pip install .`` of ``project`` ships: setuptools' own
    discovery (``packages.find`` in pyproject.toml, namespaces on) and ``py-modules``."""
    import setuptools

    config = tomllib.loads((project / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = setuptools.find_namespace_packages(str(project),
                                               include=config["packages"]["find"]["include"])
    return set(found) | set(config.get("py-modules", []))


def _check(project: Path, *extra: str, name: str = NAME,
           quick: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != registry.FAMILY_MODULES_ENV}
    few = ["--max-examples", "3", "--property", "matches-reference"] if quick else []
    return subprocess.run(
        [sys.executable, "-m", "kernel_harness.cli", "check", name, "--profile", "dev",
         *few, *extra],
        cwd=project, capture_output=True, text=True, env=env, timeout=600, check=False)


def _init(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["init", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_skeleton_passes_check_as_written_and_marks_the_places_to_fill(here, capsys):
    code, out, _ = _init(capsys, NAME, "--kernel", KERNEL)
    assert code == 0, out
    package = here / "my_scale_family"
    for rel in ("pyproject.toml", "tests/test_my_scale_family.py", "mykernels/scale.py",
                "mykernels/__init__.py"):
        assert (here / rel).is_file(), rel
    for part in ("cases", "reference", "family"):
        assert TODO in (package / f"{part}.py").read_text(), part
    pyproject = (here / "pyproject.toml").read_text()
    assert f'{NAME} = "my_scale_family.family:FAMILY"' in pyproject
    assert 'family-modules = ["my_scale_family.family"]' in pyproject
    # Installed, the family imports its placeholder kernel from the same distribution.
    assert _shipped(here) >= {"my_scale_family", "mykernels"}
    # Per-slice judging slices by every axis but "dim": a slice is one row, not one element.
    assert 'output_axes={"y": ("row", "dim"), "dx": ("row", "dim")}' in (
        package / "family.py").read_text()
    assert ".hypothesis/" in (here / ".gitignore").read_text().splitlines()
    assert "placeholder Pallas kernel" in out
    ran = _check(here)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "PASS: 1/1 properties passed on backend interpret" in ran.stdout


@pytest.mark.slow
def test_a_bug_planted_in_the_generated_kernel_fails_the_check(here, capsys):
    assert _init(capsys, NAME, "--kernel", KERNEL)[0] == 0
    kernel = here / "mykernels" / "scale.py"
    source = kernel.read_text()
    planted = source.replace("* 2.0 + 1.0", "* 2.0 + 1.001")
    assert planted != source
    kernel.write_text(planted)
    ran = _check(here, "--fail-fast")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert f"[kernel-harness] FAIL {NAME} y" in ran.stdout


def test_existing_files_are_never_overwritten(here, capsys):
    assert _init(capsys, NAME, "--kernel", KERNEL)[0] == 0
    (here / "my_scale_family" / "cases.py").write_text("# mine\n")
    code, _, err = _init(capsys, NAME, "--kernel", KERNEL)
    assert code == 2 and "not overwriting existing file(s)" in err and "cases.py" in err
    assert (here / "my_scale_family" / "cases.py").read_text() == "# mine\n"


def test_an_existing_kernel_is_wired_in_and_not_rewritten(here, capsys):
    user = here / "kh_init_user_ops.py"
    user.write_text("def triple(x, *, interpret=False):\n    return 3 * x\n")
    code, out, _ = _init(capsys, NAME, "--kernel", "kh_init_user_ops:triple")
    assert code == 0
    assert "from kh_init_user_ops import triple as kernel" in (
        here / "my_scale_family" / "family.py").read_text()
    assert user.read_text().startswith("def triple(")
    assert "the check fails until reference.py" in out
    code, _, err = _init(capsys, "other", "--kernel", "kh_init_user_ops:missing")
    assert code == 2 and "defines no 'missing'" in err


def test_a_kernel_package_beside_the_family_ships_with_it(here, capsys):
    """Issue 41: init beside an existing kernel package wrote packages = [the family]
    only, so the installed family could not import the kernel."""
    (here / "mykernels" / "ops").mkdir(parents=True)
    (here / "mykernels" / "__init__.py").write_text("")
    (here / "mykernels" / "ops" / "__init__.py").write_text("")
    (here / "mykernels" / "ops" / "scale.py").write_text(
        "def scale(x, *, interpret=False):\n    return 2 * x + 1\n")
    code, out, _ = _init(capsys, NAME, "--kernel", "mykernels.ops.scale:scale")
    assert code == 0, out
    assert _shipped(here) == {"my_scale_family", "mykernels", "mykernels.ops"}
    assert "mykernels is in this folder: pyproject.toml ships it with the family" in out
    pyproject = (here / "pyproject.toml").read_text()
    assert "mykernels, the kernel's module, ships in this distribution" in pyproject
    assert "TODO(kernel-harness): add the distribution" not in pyproject


def test_a_single_file_kernel_beside_the_family_ships_as_a_module(here, capsys):
    (here / "kh_init_user_ops.py").write_text("def triple(x, *, interpret=False):\n"
                                              "    return 3 * x\n")
    assert _init(capsys, NAME, "--kernel", "kh_init_user_ops:triple")[0] == 0
    assert _shipped(here) == {"my_scale_family", "kh_init_user_ops"}


def test_a_kernel_imported_from_elsewhere_is_a_dependency_to_add(here, capsys):
    code, out, _ = _init(capsys, NAME, "--kernel", "json.decoder:scanstring")
    assert code == 0
    assert _shipped(here) == {"my_scale_family"}
    assert "json is imported from" in out and "add the distribution that provides it" in out
    assert f"# {TODO} add the distribution that provides json" in (
        here / "pyproject.toml").read_text()


def test_an_existing_gitignore_gets_only_the_lines_it_lacks(here, capsys):
    (here / ".gitignore").write_text("__pycache__/\nsecrets.txt")
    code, out, _ = _init(capsys, NAME, "--kernel", KERNEL)
    assert code == 0
    lines = (here / ".gitignore").read_text().splitlines()
    assert lines[:2] == ["__pycache__/", "secrets.txt"]
    assert lines.count("__pycache__/") == 1 and ".hypothesis/" in lines
    assert "Appended to .gitignore: .hypothesis/" in out


@pytest.mark.parametrize("argv, message", [
    (["Bad_Name", "--kernel", KERNEL], "must be lowercase letters"),
    (["splash", "--kernel", KERNEL], "is a built-in family's name"),
    ([NAME, "--kernel", "mykernels.scale"], "must look like MODULE:FUNC"),
    ([NAME, "--kernel", "my-kernels:scale"], "is not a dotted Python name"),
    ([NAME, "--kernel", "mykernels:a.b"], "FUNC must be a function name"),
])
def test_bad_input_is_exit_2_and_writes_nothing(here, capsys, argv, message):
    code, _, err = _init(capsys, *argv)
    assert code == 2 and message in err
    assert not list(here.iterdir())


DELTA, DELTA_KERNEL = "my-delta", "mykernels.delta:delta"


def _tree(project: Path) -> dict[str, bytes]:
    return {str(p.relative_to(project)): p.read_bytes()
            for p in sorted(project.rglob("*")) if p.is_file()}


def test_op_rowwise_is_the_default_byte_for_byte(here, capsys, monkeypatch):
    for folder, extra in (("default", []), ("rowwise", ["--op", "rowwise"])):
        (here / folder).mkdir()
        monkeypatch.chdir(here / folder)
        assert _init(capsys, NAME, "--kernel", KERNEL, *extra)[0] == 0
    assert _tree(here / "default") == _tree(here / "rowwise")


def test_the_delta_rule_skeleton_passes_check_as_written(here, capsys):
    """Per push: matches-reference on a few cases (the nightly test runs every property)."""
    code, out, _ = _init(capsys, DELTA, "--kernel", DELTA_KERNEL, "--op", "delta-rule")
    assert code == 0, out
    package = here / "my_delta_family"
    assert {p.name for p in package.iterdir()} == {"__init__.py", "family.py"}
    family = (package / "family.py").read_text()
    assert family.count(TODO) >= 8
    assert "interpret=backend.pallas_interpret()" in family
    assert "from mykernels.delta import delta as kernel" in family
    assert (here / "mykernels" / "delta.py").is_file()
    assert _shipped(here) >= {"my_delta_family", "mykernels"}
    assert "placeholder Pallas kernel of the delta rule" in out
    ran = _check(here, name=DELTA)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "PASS: 1/1 properties passed on backend interpret" in ran.stdout


@pytest.mark.nightly
def test_the_delta_rule_skeleton_passes_every_applicable_property(here, capsys):
    assert _init(capsys, DELTA, "--kernel", DELTA_KERNEL, "--op", "delta-rule")[0] == 0
    ran = _check(here, name=DELTA, quick=False)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "PASS: 8/8 properties passed on backend interpret" in ran.stdout


def test_a_rowwise_kernel_without_interpret_is_called_without_it(here, capsys):
    (here / "kh_init_user_ops.py").write_text("def scale(x):\n    return 2 * x + 1\n")
    code, out, _ = _init(capsys, NAME, "--kernel", "kh_init_user_ops:scale")
    assert code == 0, out
    family = (here / "my_scale_family" / "family.py").read_text()
    assert "interpret=interpret" not in family and "impl(x) -> y" in family
    assert f"# {TODO} your kernel takes no interpret=" in family
    from my_scale_family.family import FAMILY

    case = FAMILY.case_type(dtype="float32", seed=0, rows=8, dim=128)
    inputs = case.materialize()
    got = FAMILY.run(FAMILY.kernel, case, inputs, resolve_backend("interpret"))
    np.testing.assert_allclose(got["y"], 2 * inputs["x"] + 1, rtol=1e-6)


def test_a_kernel_taking_any_keyword_gets_interpret(here, capsys):
    (here / "kh_init_user_ops.py").write_text("def scale(x, **options):\n    return x\n")
    assert _init(capsys, NAME, "--kernel", "kh_init_user_ops:scale")[0] == 0
    assert "impl(x, interpret=interpret)" in (
        here / "my_scale_family" / "family.py").read_text()


def _kernel_without_interpret() -> str:
    """The placeholder delta-rule kernel with no ``interpret`` argument (a TPU kernel's
    way: Pallas's TPU interpret mode must be forced around it off a TPU)."""
    text = string.Template(scaffold_delta_rule.KERNEL).substitute(func="recur", todo="")
    text = text.replace(", interpret=False):", "):").replace("interpret=interpret,\n", "")
    assert "interpret" not in text.split('"""', 2)[2]
    return text


def test_a_delta_rule_kernel_without_interpret_is_wired_without_it(here, capsys):
    (here / "kh_init_user_delta.py").write_text(_kernel_without_interpret())
    code, out, _ = _init(capsys, DELTA, "--kernel", "kh_init_user_delta:recur", "--op",
                         "delta-rule")
    assert code == 0, out
    family = (here / "my_delta_family" / "family.py").read_text()
    assert "interpret=" not in family.replace("takes no interpret=", "")
    assert "context=lambda case, backend: backend.forcing_interpret()" in family
    assert "qk_l2norm) -> (out, final_state)" in family
    assert "until family.traceable maps the op's layout to your kernel's" in out
    assert not (here / "mykernels").exists()


@pytest.mark.slow
def test_a_delta_rule_kernel_without_interpret_runs_in_forced_interpret_mode(here, capsys):
    (here / "kh_init_user_delta.py").write_text(_kernel_without_interpret())
    assert _init(capsys, DELTA, "--kernel", "kh_init_user_delta:recur", "--op",
                 "delta-rule")[0] == 0
    from my_delta_family.family import FAMILY

    case = FAMILY.seed_cases(frozenset())[0]
    inputs = case.materialize()
    got = FAMILY.run(FAMILY.kernel, case, inputs, resolve_backend("interpret"))
    want = FAMILY.reference(case, inputs)
    for name in ("out", "final_state"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5)


def test_an_unknown_op_is_a_usage_error_naming_the_kinds(here, capsys):
    code, _, err = _init(capsys, NAME, "--kernel", KERNEL, "--op", "attention")
    assert code == 2
    assert "unknown --op 'attention'" in err and "rowwise, delta-rule" in err
    assert not list(here.iterdir())


def test_init_help_lists_the_kinds_one_line_each(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["init", "--help"])
    assert exited.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    for kind, what in OPS.items():
        assert sum(line.split()[:1] == [kind] for line in lines) == 1, kind
        assert any(line.strip() == f"{kind:<11} {what}" for line in lines), kind
