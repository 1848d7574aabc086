"""One installed family plugin that cannot import breaks only itself (issue 41).

The plugin is installed the way pip leaves it: a dist-info whose entry_points.txt declares
``rope = rope_family.family:FAMILY`` in the harness's group, and the package beside it,
whose family module imports a kernel module that is not installed. ``list`` shows it with
its import error (exit 0), ``check`` and ``describe`` of another family work, and
``check``/``describe`` of the broken one is exit 2 naming the error.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kernel_harness import cli
from kernel_harness.records import registry

ERROR = ("family at rope_family.family:FAMILY does not import: ModuleNotFoundError: "
         "No module named 'ropekern_not_installed'")


def _install(site: Path, family_module: str) -> None:
    info = site / "rope_family-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rope-family\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{registry.ENTRY_POINT_GROUP}]\nrope = rope_family.family:FAMILY\n")
    (site / "rope_family").mkdir()
    (site / "rope_family" / "__init__.py").write_text("")
    (site / "rope_family" / "family.py").write_text(family_module)


@pytest.fixture
def broken_plugin(tmp_path, monkeypatch):
    """The broken plugin installed on sys.path (importlib.metadata reads it from there)."""
    _install(tmp_path / "site", "from ropekern_not_installed.k import rope as kernel\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy", "tests.helpers.toy_family:FAMILY")
    yield
    for name in [m for m in sys.modules if m.split(".")[0] == "rope_family"]:
        del sys.modules[name]


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_shows_every_family_and_the_broken_one_with_its_error(broken_plugin, capsys):
    code, out, err = _run(capsys, "list")
    assert code == 0, err
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "toy" in rows and "splash" in rows
    assert "DOES NOT IMPORT" in rows["rope"]
    assert f"  rope: {ERROR}" in out.splitlines()


def test_other_families_describe_and_check_while_the_broken_one_is_exit_2(
    broken_plugin, capsys
):
    code, out, _ = _run(capsys, "describe", "toy")
    assert code == 0 and out.startswith("toy:")
    code, out, _ = _run(capsys, "check", "--no-isolate", "toy", "--profile", "dev",
                        "--max-examples", "2", "--property", "matches-reference")
    assert code == 0, out
    assert "PASS: 1/1 properties passed" in out
    for command in ("describe", "check"):
        code, _, err = _run(capsys, command, "rope")
        assert code == 2 and ERROR in err, (command, err)


def test_a_plugin_raising_anything_at_import_is_named_not_a_traceback(
    tmp_path, monkeypatch, capsys
):
    _install(tmp_path / "site", "raise RuntimeError('no GPU driver found')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    code, out, _ = _run(capsys, "list")
    assert code == 0
    assert ("rope: family at rope_family.family:FAMILY does not import: RuntimeError: "
            "no GPU driver found") in out
    code, _, err = _run(capsys, "describe", "rope")
    assert code == 2 and "RuntimeError: no GPU driver found" in err


def test_an_every_family_check_runs_the_others_and_reports_the_broken_one(broken_plugin):
    from kernel_harness.orchestration.request import CheckRequest
    from kernel_harness.orchestration.session import CheckSession

    session = CheckSession(CheckRequest(properties=("deterministic",)))
    assert "toy" in {f.name for f in session.families}
    assert "rope" not in {f.name for f in session.families}
    (broken,) = [r for r in session.skip_results() if r.family == "rope"]
    # (the import error text is the plugin's; another test of this module plants another)
    assert broken.verdict == "ERROR" and broken.ran and "does not import" in broken.line
    assert broken.record["error"]["type"] == "FamilyDoesNotImport"
    assert "rope_family.family:FAMILY does not import" in broken.record["error"]["message"]
    import json

    import jsonschema

    from kernel_harness.orchestration import results

    env = results.environment(session.backend, profile="dev", seed=None, max_examples=None,
                              impl=None)
    jsonschema.validate(results.document(env, [broken.record]),
                        json.loads(results.SCHEMA_PATH.read_text()))
