"""One rule from options to a request (kernel_harness/orchestration/options.py): a given
option beats the project's ``[tool.kernel-harness]``, which beats the front end's default,
for every front end: ``check``, ``gate``, ``corpus``, ``pytest --kh-*`` and
``kernel_harness.testing.check``. Each case below is the same three-way table."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

import kernel_harness.testing as testing
from kernel_harness import cli
from kernel_harness.cli import check as check_cli
from kernel_harness.cli import common
from kernel_harness.core.errors import UsageError
from kernel_harness.orchestration import options
from kernel_harness.records.config import HarnessConfig, load_config

CONFIG = """[tool.kernel-harness]
profile = "nightly"
backend = "tpu-interpret"
corpus = "stored"
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's folder whose pyproject.toml configures profile, backend and corpus."""
    (tmp_path / ".git").mkdir()  # the walk up stops here
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    (tmp_path / "stored").mkdir()
    (tmp_path / "given").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_resolve_given_beats_config_beats_default(project: Path):
    config = load_config()
    assert options.resolve("backend", "gpu", config, "interpret", "--kh-backend") == (
        options.Setting("gpu", "given", "from --kh-backend"))
    assert options.resolve("backend", None, config, "interpret") == options.Setting(
        "tpu-interpret", "config",
        f"from backend in {project / 'pyproject.toml'} [tool.kernel-harness]")
    assert options.resolve("backend", None, HarnessConfig(), "interpret") == options.Setting(
        "interpret", "default", "the default")
    assert options.resolve("corpus", None, config, None).value == str(project / "stored")


def test_a_configured_name_the_harness_does_not_know_names_key_and_file(tmp_path: Path):
    config = HarnessConfig(source=tmp_path / "pyproject.toml", profile="fast")
    with pytest.raises(UsageError, match=r"profile in .*pyproject.toml \[tool.kernel-harness\]"
                                         r": 'fast' is not one of dev, ci, nightly"):
        options.resolve("profile", None, config, "dev")


def test_check_request_takes_resolved_settings_only():
    resolved = options.settings(HarnessConfig(), {}, {"profile": "dev", "backend": "interpret"})
    with pytest.raises(ValueError, match="not resolved: corpus"):
        options.check_request(resolved)
    resolved["corpus"] = options.Setting(None, "default")
    with pytest.raises(ValueError, match="as resolved settings"):
        options.check_request(resolved, backend="gpu")
    assert options.check_request(resolved).origins == {
        "profile": "default", "backend": "default", "corpus": "default"}


def _cli(argv: list[str]) -> types.SimpleNamespace:
    args = cli.parse_args(argv)
    common.apply_config(args, load_config())
    return args


def test_check_cli(project: Path):
    request = check_cli.request_from_args(_cli(["check", "hstu"]))
    assert (request.profile, request.backend, request.corpus) == (
        "nightly", "tpu-interpret", str(project / "stored"))
    assert request.origins == {"profile": "config", "backend": "config", "corpus": "config"}
    request = check_cli.request_from_args(_cli(
        ["check", "hstu", "--profile", "ci", "--backend", "interpret", "--corpus", "given"]))
    assert (request.profile, request.backend, request.corpus) == ("ci", "interpret", "given")
    assert request.origins == {"profile": "given", "backend": "given", "corpus": "given"}
    (project / "pyproject.toml").write_text("[tool.kernel-harness]\n")
    request = check_cli.request_from_args(_cli(["check", "hstu"]))
    assert (request.profile, request.backend, request.corpus) == ("dev", "interpret", None)
    assert set(request.origins.values()) == {"default"}


@pytest.mark.parametrize("argv", [["gate", "hstu"], ["corpus", "list"],
                                  ["corpus", "replay", "hstu"]])
def test_gate_and_corpus_cli(project: Path, argv: list[str]):
    args = _cli(argv)
    assert args.corpus == str(project / "stored")
    assert args.kh_settings["corpus"].origin == "config"
    args = _cli([*argv, "--corpus", "given"])
    assert (args.corpus, args.kh_settings["corpus"].origin) == ("given", "given")
    if argv != ["corpus", "list"]:  # the commands that run kernels take a backend too
        assert args.backend == "tpu-interpret"
        assert _cli([*argv, "--backend", "interpret"]).backend == "interpret"
    (project / "pyproject.toml").write_text("[tool.kernel-harness]\n")
    assert _cli(argv).corpus is None


def test_corpus_cli_without_any_corpus_is_a_usage_error(project: Path, capsys):
    (project / "pyproject.toml").write_text("[tool.kernel-harness]\n")
    assert cli.main(["corpus", "list"]) == 2
    assert "give --corpus LOCATION, or set corpus in [tool.kernel-harness]" in (
        capsys.readouterr().err)


class _Captured:
    """Stands in for CheckSession in testing.check: keeps the request, runs nothing."""

    requests: list = []

    def __init__(self, request):
        self.requests.append(request)

    def run(self):
        return types.SimpleNamespace(ok=True)


def test_testing_check(project: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(testing, "CheckSession", _Captured)
    _Captured.requests = []
    testing.check("hstu")
    testing.check("hstu", profile="ci", backend="interpret", corpus="given")
    (project / "pyproject.toml").write_text("[tool.kernel-harness]\n")
    testing.check("hstu")
    got = [(r.profile, r.backend, r.corpus, r.origins["profile"]) for r in _Captured.requests]
    assert got == [("nightly", "tpu-interpret", str(project / "stored"), "config"),
                   ("ci", "interpret", "given", "given"),
                   ("dev", "interpret", None, "default")]


class _PytestConfig:
    """What testing's pytest collection reads of a pytest config: options and the folder."""

    def __init__(self, folder: Path, **given):
        self.invocation_params = types.SimpleNamespace(dir=folder)
        self.given = given

    def getoption(self, name: str, default=None):
        key = name.lstrip("-").replace("-", "_")
        if key in self.given:
            return self.given[key]
        return [] if key in ("kh_family_module", "kh_impl", "kh_without", "kh_property",
                             "kh_tolerance") else default


def _pytest_request(folder: Path, monkeypatch: pytest.MonkeyPatch, **given):
    monkeypatch.setattr(testing, "CheckSession", _Captured)
    _Captured.requests = []
    testing._Plan(_PytestConfig(folder, **given), ["hstu"])  # what pytest --kh-check builds
    (request,) = _Captured.requests
    return request


def test_pytest_options(project: Path, monkeypatch: pytest.MonkeyPatch):
    request = _pytest_request(project, monkeypatch)
    assert (request.profile, request.backend, request.corpus) == (
        "nightly", "tpu-interpret", str(project / "stored"))
    request = _pytest_request(project, monkeypatch, kh_profile="kernel-harness-ci",
                              kh_backend="interpret", kh_corpus="given")
    assert (request.profile, request.backend, request.corpus) == ("ci", "interpret", "given")
    assert set(request.origins.values()) == {"given"}
    (project / "pyproject.toml").write_text("[tool.kernel-harness]\n")
    # pytest's own default: the harness profile --hypothesis-profile names, else dev
    request = _pytest_request(project, monkeypatch, hypothesis_profile="ci")
    assert (request.profile, request.backend, request.corpus) == ("ci", "interpret", None)
    assert _pytest_request(project, monkeypatch).profile == "dev"


WITHOUT_AND_WAIVER = """[tool.kernel-harness]
without = {toy = ["long"]}

[[tool.kernel-harness.waivers]]
family = "toy"
kind = "race"
kernel = "_copy_kernel"
buffer = "output"
reason = "test: a user's reviewed benign race"

[[tool.kernel-harness.known-bugs]]
family = "toy"
without = ["short"]
reason = "test: a known bug"
"""


def test_without_and_waivers_travel_with_every_front_ends_request(
        project: Path, monkeypatch: pytest.MonkeyPatch):
    from kernel_harness.orchestration.request import CheckRequest

    (project / "pyproject.toml").write_text(WITHOUT_AND_WAIVER)
    monkeypatch.setattr(testing, "CheckSession", _Captured)
    _Captured.requests = []
    testing.check("hstu")
    requests = [check_cli.request_from_args(_cli(["check", "hstu", "--without", "x"])),
                _Captured.requests[0], _pytest_request(project, monkeypatch)]
    for request in requests:
        assert request.config_without == {"toy": frozenset({"long"})}
        assert request.config_source == str(project / "pyproject.toml")
        assert [w["reason"] for w in request.waivers] == ["test: a user's reviewed benign race"]
        sent = CheckRequest.from_json_dict(request.to_json_dict())  # to a worker process
        assert request.known_bugs == ({"family": "toy", "without": ("short",),
                                       "reason": "test: a known bug", "link": None},)
        assert (sent.config_without, sent.config_source, sent.waivers, sent.known_bugs) == (
            request.config_without, request.config_source, request.waivers,
            request.known_bugs)
    assert requests[0].without == ("x",)  # the command line's, beside the table's


def test_a_session_narrows_by_the_table_and_runs_its_units_with_its_waivers(
        project: Path, monkeypatch: pytest.MonkeyPatch):
    """The session's report names the file; its units run with the user's waivers."""
    from kernel_harness.orchestration import session_header
    from kernel_harness.orchestration.session import CheckSession
    from kernel_harness.records import registry
    from kernel_harness.run import diagnostics

    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toyopt", "tests.helpers.toy_narrow:FAMILY")
    # The table's known bug and waiver name "toy": registered, as a typo would not be.
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy", "tests.helpers.toy_family:FAMILY")
    (project / "pyproject.toml").write_text(WITHOUT_AND_WAIVER.replace("toy =", "toyopt ="))
    config = load_config()
    request = options.check_request(
        options.settings(config, {}, {"profile": "dev", "backend": "interpret", "corpus": None}),
        config, families=("toyopt",), properties=("matches-reference",), max_examples=1)
    session = CheckSession(request, emit=lambda line: None)
    where = f"from without in {project / 'pyproject.toml'} [tool.kernel-harness]"
    assert session.families[0].without == {"long"}
    assert session_header.adjustment_lines(session, session.families[0]) == [
        f"checked without: long ({where})"]
    try:
        result = session.run_unit(session.units[0])
        assert result.verdict == "PASS", result.text
        (user,) = diagnostics.active_waivers()[len(diagnostics.load_waivers()):]
        assert (user.label, user.source) == ("pyproject.toml entry 1",
                                             str(project / "pyproject.toml"))
    finally:
        diagnostics.use_user_waivers(())
