"""Installing kernel-harness changes nothing for someone else's tests.

A fresh project (in a temporary directory, with this environment's installed
plugin) has one unrelated ``@given`` test and registers its own ``ci`` profile:
it must run Hypothesis's defaults (100 examples, 200 ms deadline) or its own
``ci``, and pytest start-up must not import jax. A test there that asks for a
harness fixture does load the harness (and jax) then, and gets the harness profile.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

USER_CONFTEST = """
from hypothesis import settings
settings.register_profile("ci", max_examples=17)
"""

USER_TEST = """
import os, sys
import datetime
from hypothesis import given, settings, strategies as st

SEEN = []

@given(st.integers())
def test_user_property(x):
    SEEN.append(x)

def test_zz_report(request):
    assert request.config.pluginmanager.hasplugin("kernel_harness"), "plugin not loaded"
    assert "jax" not in sys.modules, "pytest start-up imported jax"
    assert "kernel_harness.run.runner" not in sys.modules
    assert len(SEEN) == int(os.environ["EXPECTED_EXAMPLES"]), len(SEEN)
    assert settings.default.deadline == datetime.timedelta(
        milliseconds=int(os.environ["EXPECTED_DEADLINE_MS"]))
"""

HARNESS_USER_TEST = """
import sys
from hypothesis import settings

def test_uses_harness(kh_backend, kh_profile):
    assert "jax" in sys.modules and kh_backend.name == "interpret"
    assert kh_profile.max_examples == 30 and kh_profile.derandomize
    assert settings.default.max_examples == 100  # the harness left the default alone
"""


#: Hypothesis loads its own "ci" profile when these are set (as in .ci/run); a user's
#: project would see that with or without the harness, so the guest runs without them.
_CI_VARIABLES = ("CI", "TF_BUILD")


def _pytest(project: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in _CI_VARIABLES}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=project, capture_output=True, text=True, env={**base, **env}, timeout=300,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "conftest.py").write_text(textwrap.dedent(USER_CONFTEST))
    (tmp_path / "test_user.py").write_text(textwrap.dedent(USER_TEST))
    return tmp_path


@pytest.mark.parametrize(
    "args, examples, deadline_ms",
    [((), 100, 200), (("--hypothesis-profile", "ci"), 17, 200)],
    ids=["hypothesis-defaults", "own-ci-profile"],
)
def test_unrelated_project_keeps_its_settings_and_never_imports_jax(
    project, args, examples, deadline_ms
):
    proc = _pytest(project, *args, "test_user.py", env={
        "EXPECTED_EXAMPLES": str(examples), "EXPECTED_DEADLINE_MS": str(deadline_ms)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout


def test_harness_fixtures_load_the_harness_and_apply_its_own_ci_profile(project):
    (project / "test_harness_use.py").write_text(textwrap.dedent(HARNESS_USER_TEST))
    proc = _pytest(project, "--kh-profile", "ci", "test_harness_use.py", env={})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # --hypothesis-profile ci picks the harness's ci for the harness (the user's ci, 17
    # examples, stays the default for the user's tests).
    proc = _pytest(project, "--hypothesis-profile", "ci", "test_harness_use.py", env={})
    assert proc.returncode == 1 and "assert 17 == 100" in proc.stdout, proc.stdout


def test_namespaced_profile_can_be_loaded_by_name(project):
    (project / "test_named.py").write_text(
        "import sys\nfrom hypothesis import settings\n\n"
        "def test_named():\n"
        "    assert settings.get_current_profile_name() == 'kernel-harness-ci'\n"
        "    assert settings.default.max_examples == 30 and settings.default.deadline is None\n"
        "    assert 'jax' not in sys.modules\n"
    )
    proc = _pytest(project, "--hypothesis-profile", "kernel-harness-ci", "test_named.py", env={})
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_kh_family_module_reaches_the_property_tests():
    """An out-of-tree family named with --kh-family-module is parametrized like a built-in
    one, and its planted bug fails the property test (``--kh-impl``)."""
    root = Path(__file__).resolve().parents[1]
    args = ["properties/test_units.py", "-m", "nightly", "-k", "toy", "--kh-family-module",
            "tests.helpers.toy_family", "--kh-profile", "dev", "--kh-property",
            "matches-reference"]
    env = {k: v for k, v in os.environ.items()
           if k not in ("KERNEL_HARNESS_FAMILY_MODULES", *_CI_VARIABLES)}
    ok = _pytest(root, *args, env=env)
    assert ok.returncode == 0 and "1 passed" in ok.stdout, ok.stdout + ok.stderr
    # --kh-shrink-budget reaches the session as --shrink-budget does (0: the first failing
    # example as found; it is not what this test is about, and shrinking it cost 4 s).
    bad = _pytest(root, *args, "--kh-impl", "toy=tests.helpers.toy_family:wrong_softplus",
                  "--kh-shrink-budget", "0", env=env)
    assert bad.returncode == 1 and "FAIL toy y" in bad.stdout, bad.stdout
    assert "the 0 steps budget ran out" in bad.stdout, bad.stdout
