"""``[tool.kernel-harness]`` in the user's pyproject.toml: found walking up, validated with
errors naming the file and key, and applied by the CLI (flag > configuration > default)."""

from __future__ import annotations

import dataclasses
import os
import textwrap
from pathlib import Path

import pytest

from kernel_harness import cli
from kernel_harness.cli import common
from kernel_harness.core.errors import UsageError
from kernel_harness.records import registry
from kernel_harness.records.config import HarnessConfig, find_pyproject, load_config

REPO = Path(__file__).resolve().parents[2]


def _pyproject(folder: Path, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "pyproject.toml"
    path.write_text(textwrap.dedent(body))
    return path


@pytest.fixture
def isolated_registry(monkeypatch):
    monkeypatch.setattr(registry, "_from_modules", {})
    monkeypatch.setattr(registry, "_loaded_modules", set())
    monkeypatch.delenv(registry.FAMILY_MODULES_ENV, raising=False)
    monkeypatch.setenv("PYTHONPATH", "")


def test_found_walking_up_past_a_pyproject_without_the_table(tmp_path):
    top = _pyproject(tmp_path / "repo", """
        [tool.kernel-harness]
        family-modules = ["mykernels.family"]
        golden-dir = "tests/golden"
        profile = "ci"
        backend = "interpret"
        corpus = "tests/corpus"
    """)
    (tmp_path / "repo" / ".git").mkdir()
    _pyproject(tmp_path / "repo" / "sub", "[project]\nname = 'sub'\n")
    deep = tmp_path / "repo" / "sub" / "pkg"
    deep.mkdir()
    config = load_config(deep)
    assert config.source == top.resolve()
    assert config.family_modules == ("mykernels.family",)
    assert config.golden_dir == (tmp_path / "repo" / "tests" / "golden").resolve()
    assert config.corpus == str((tmp_path / "repo" / "tests" / "corpus").resolve())
    assert (config.profile, config.backend) == ("ci", "interpret")
    assert config.where("profile") == f"profile in {top.resolve()} [tool.kernel-harness]"


def test_corpus_directories_are_made_absolute_and_other_locations_kept(tmp_path):
    _pyproject(tmp_path, '[tool.kernel-harness]\n'
               'corpus = "ro:shared, redis://db:6379/0,github:org/repo,mine"\n')
    root = tmp_path.resolve()
    assert load_config(tmp_path).corpus == (
        f"ro:{root / 'shared'},redis://db:6379/0,github:org/repo,{root / 'mine'}")


def test_the_walk_stops_at_a_vcs_root(tmp_path):
    _pyproject(tmp_path, "[tool.kernel-harness]\nprofile = 'ci'\n")
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    assert find_pyproject(checkout) is None
    assert load_config(checkout) == HarnessConfig()


def test_this_repository_has_no_table_but_its_known_bugs_and_accepted_helpers():
    """Its own tests and CI run with the built-in defaults; the table declares only the
    built-in families' known bugs, each linking its finding, and the lines of the test
    suite's planted implementations that keep state on purpose, each in its file."""
    config = load_config(REPO)
    assert dataclasses.replace(config, source=None, known_bugs=(),
                               accepted_source=()) == HarnessConfig()
    for bug in config.known_bugs:
        assert (REPO / bug["link"] / "FINDING.md").is_file(), bug
    for entry in config.accepted_source:
        path = Path(entry["file"])
        assert path.parent == REPO / "tests" / "helpers", entry
        assert entry["text"] in path.read_text(), entry


@pytest.mark.parametrize("body, words", [
    ("golden_dir = 'x'", ["unknown key(s) ['golden_dir']", "accepted: family-modules"]),
    ("family-modules = 'mod'", ["family-modules = 'mod'", "a list of module names",
                                "got a str"]),
    ("family-modules = ['a', 3]", ["a list with a non-string or empty item"]),
    ("profile = 3", ["profile = 3", "a profile name", "got a int"]),
    ("golden-dir = ''", ["golden-dir = ''", "got an empty string"]),
])
def test_bad_keys_and_types_name_the_file_the_key_and_what_is_accepted(tmp_path, body, words):
    path = _pyproject(tmp_path, f"[tool.kernel-harness]\n{body}\n")
    with pytest.raises(UsageError) as e:
        load_config(tmp_path)
    assert str(path.resolve()) in str(e.value)
    for w in words:
        assert w in str(e.value)


def test_invalid_toml_is_a_usage_error_naming_the_file(tmp_path):
    path = _pyproject(tmp_path, "[tool.kernel-harness\n")
    with pytest.raises(UsageError, match="cannot read it as TOML") as e:
        load_config(tmp_path)
    assert str(path.resolve()) in str(e.value)


def test_flag_beats_configuration_beats_builtin_default(tmp_path):
    config = HarnessConfig(source=tmp_path / "pyproject.toml", backend="tpu-interpret",
                           profile="nightly")
    args = cli.parse_args(["mutate", "toy"])
    common.apply_config(args, config)
    assert (args.backend, args.profile) == ("tpu-interpret", "nightly")
    args = cli.parse_args(["mutate", "toy", "--backend", "interpret", "--profile", "dev"])
    common.apply_config(args, config)
    assert (args.backend, args.profile) == ("interpret", "dev")
    args = cli.parse_args(["mutate", "toy"])
    common.apply_config(args, HarnessConfig())
    assert (args.backend, args.profile) == ("interpret", "ci")
    for argv in (["golden", "check"], ["golden", "record"], ["golden", "add", "t", "n",
                 "--case", "{}"], ["gate"], ["repro", "t", "--case", "{}"], ["bench"],
                 ["export-repro", "t", "--case", "{}", "--out", "x.py"]):
        args = cli.parse_args(argv)
        common.apply_config(args, config)
        assert args.backend == "tpu-interpret", argv


def test_an_unknown_configured_name_names_the_key_and_file(tmp_path):
    config = HarnessConfig(source=tmp_path / "pyproject.toml", profile="weekly")
    args = cli.parse_args(["mutate", "toy"])
    with pytest.raises(UsageError, match=r"profile in .*pyproject.toml \[tool.kernel-harness\]: "
                                         r"'weekly' is not one of dev, ci, nightly"):
        common.apply_config(args, config)


def test_configured_family_modules_are_registered_from_the_pyproject_folder(
    tmp_path, monkeypatch, capsys, isolated_registry
):
    """A family module beside the user's pyproject.toml is found from a subfolder too."""
    repo = tmp_path / "repo"
    _pyproject(repo, "[tool.kernel-harness]\nfamily-modules = ['kh_cfg_toy']\n")
    (repo / "kh_cfg_toy.py").write_text("from tests.helpers.toy_family import FAMILY\n")
    (repo / "sub").mkdir()
    monkeypatch.chdir(repo / "sub")
    monkeypatch.syspath_prepend(str(REPO))
    assert cli.main(["list"]) == 0
    assert any(line.startswith("toy ") for line in capsys.readouterr().out.splitlines())
    assert registry.family_target("toy") == "kh_cfg_toy:FAMILY"
    assert str(repo) in os.environ["PYTHONPATH"].split(os.pathsep)


def test_a_configured_module_that_does_not_import_names_the_key(
    tmp_path, monkeypatch, capsys, isolated_registry
):
    _pyproject(tmp_path, "[tool.kernel-harness]\nfamily-modules = ['no_such_kh_module']\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["list"]) == 2
    err = capsys.readouterr().err
    assert "family-modules in " in err and "no_such_kh_module: cannot import it" in err


WAIVER = """
[[tool.kernel-harness.waivers]]
family = "toy"
kind = "uninitialized-read"
kernel = "^_sum_kernel"
buffer = "vmem"
line = "planted_kernels\\\\.py"
reason = "the select discards what is read before the first write"
"""


def test_without_and_waivers_are_read(tmp_path):
    _pyproject(tmp_path, '[tool.kernel-harness]\nwithout = {sdpa = ["bias", "window"]}\n'
               + WAIVER)
    config = load_config(tmp_path)
    assert config.without == {"sdpa": ("bias", "window")}
    (waiver,) = config.waivers
    assert waiver == {"family": "toy", "kind": "uninitialized-read", "kernel": "^_sum_kernel",
                      "buffer": "vmem", "reason": "the select discards what is read before "
                      "the first write", "line": r"planted_kernels\.py"}


@pytest.mark.parametrize("change, words", [
    (("reason = ", "# "), ["lacks ['reason']", "a waiver needs family", "reason (why"]),
    (('"the select discards what is read before the first write"', '" "'),
     ["needs a reason: say why the finding is benign"]),
    (('"uninitialized-read"', '"uninit"'),
     ["unknown kind 'uninit': one of race, uninitialized-read"]),
    (('"^_sum_kernel"', '"(_sum"'), ["kernel: bad regular expression"]),
    (("line = ", "lines = "), ["unknown field(s) ['lines']"]),
    (('kind = "uninitialized-read"', 'kind = "race"\njax = "0.12"'),
     ["jax: jax version clause '0.12': start it with"]),
])
def test_a_malformed_waiver_names_the_file_the_entry_and_the_fix(tmp_path, change, words):
    old, new = change
    assert old in WAIVER
    path = _pyproject(tmp_path, "[tool.kernel-harness]\n" + WAIVER + WAIVER.replace(old, new))
    with pytest.raises(UsageError) as e:
        load_config(tmp_path)
    text = str(e.value)
    assert text.startswith(f"{path.resolve()}: [[tool.kernel-harness.waivers]] entry 2 "
                           "(family = 'toy') "), text
    for w in words:
        assert w in text


@pytest.mark.parametrize("body, words", [
    ('without = ["bias"]', ["without = ['bias']: expected a table of family name"]),
    ('without = {sdpa = "bias"}', ["without.sdpa = 'bias': expected a list of feature names",
                                   "kernel-harness describe sdpa"]),
    ("waivers = {family = 'x'}", ["waivers: expected a list of tables"]),
])
def test_a_malformed_without_or_waivers_table_says_what_is_accepted(tmp_path, body, words):
    _pyproject(tmp_path, f"[tool.kernel-harness]\n{body}\n")
    with pytest.raises(UsageError) as e:
        load_config(tmp_path)
    for w in words:
        assert w in str(e.value), str(e.value)


BUG = '[[tool.kernel-harness.known-bugs]]\nfamily = "sdpa"\nwithout = ["bias"]\nreason = "r"\n'


def test_known_bugs_are_read_with_their_reason_and_link(tmp_path):
    _pyproject(tmp_path, "[tool.kernel-harness]\n" + BUG + 'link = "issues/3"\n')
    assert load_config(tmp_path).known_bugs == (
        {"family": "sdpa", "without": ("bias",), "reason": "r", "link": "issues/3"},)


@pytest.mark.parametrize("change, words", [
    (('reason = "r"\n', ""), ["entry 1: lacks ['reason']", "reason (what the bug is"]),
    (('reason = "r"', 'reason = " "'), ["entry 1: reason must be non-empty text"]),
    (('["bias"]', "[]"), ["entry 1: without must be a non-empty list of feature names"]),
    (('reason = "r"\n', 'reason = "r"\nowner = "me"\n'), ["entry 1: unknown ['owner']"]),
])
def test_a_malformed_known_bug_names_the_file_the_entry_and_what_is_accepted(tmp_path, change,
                                                                           words):
    old, new = change
    assert old in BUG
    path = _pyproject(tmp_path, "[tool.kernel-harness]\n" + BUG.replace(old, new))
    with pytest.raises(UsageError) as e:
        load_config(tmp_path)
    text = str(e.value)
    assert text.startswith(f"{path.resolve()}: [[tool.kernel-harness.known-bugs]] "), text
    for w in words:
        assert w in text, text
