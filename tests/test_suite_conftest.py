"""The repository conftest's speed mechanisms (docs/ci.md, "How CI stays fast"): the nightly
marker leaves its tests to ``-m nightly`` and says so, heavy files run first, and
``$KERNEL_HARNESS_TEST_DURATIONS`` streams each test's time. Run on a copy of conftest.py in
a scratch project, in a fresh pytest process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers.repo_conftest import load_repo_conftest

ROOT = Path(__file__).resolve().parents[1]
TESTS = '''
import pytest

def test_quick():
    pass

@pytest.mark.nightly
def test_long():
    pass
'''


def _run(tmp_path: Path, *args: str, xdist: bool = False) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text((ROOT / "conftest.py").read_text())
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n  nightly: n\n  slow: s\n")
    (tmp_path / "test_a.py").write_text("def test_light():\n    pass\n")
    (tmp_path / "properties").mkdir(exist_ok=True)
    (tmp_path / "properties" / "test_z.py").write_text(TESTS)
    env = {**os.environ, "KERNEL_HARNESS_TEST_DURATIONS": str(tmp_path / "d.tsv")}
    env.pop("KERNEL_HARNESS_TEST_COMPILE_CACHE", None)
    plugins = [] if xdist else ["-p", "no:xdist"]
    return subprocess.run([sys.executable, "-m", "pytest", *plugins, "-p",
                           "no:cacheprovider", "-v", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False, timeout=300)


def test_nightly_tests_are_left_to_the_nightly_run_and_said_so(tmp_path):
    proc = _run(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed, 1 deselected" in proc.stdout
    assert "1 test(s) marked nightly not run here" in proc.stdout
    ran = [line.split("::")[1].split()[0] for line in proc.stdout.splitlines()
           if " PASSED" in line]
    assert ran == ["test_quick", "test_light"]  # properties/ first
    lines = (tmp_path / "d.tsv").read_text().splitlines()
    assert len(lines) == 6 and lines[1].split("\t")[:2] == ["properties/test_z.py::test_quick",
                                                          "call"]


def test_under_xdist_the_summary_still_says_what_was_left_out(tmp_path):
    """The workers collect and deselect; the controller's summary must still say it (CI runs
    ``-n 2``: without this the left-out tests were nowhere in its output)."""
    proc = _run(tmp_path, "-n", "2", xdist=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout
    assert "1 test(s) marked nightly not run here" in proc.stdout


def test_minus_m_nightly_runs_them(tmp_path):
    proc = _run(tmp_path, "-m", "nightly")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed, 2 deselected" in proc.stdout
    assert "marked nightly not run here" not in proc.stdout


def test_every_both_stacks_path_exists_and_is_marked():
    conftest = load_repo_conftest()
    missing = [p for p in conftest.BOTH_STACKS if not (ROOT / p).exists()]
    assert not missing, f"conftest.BOTH_STACKS names missing test paths: {missing}"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p",
                           "no:cacheprovider", "--collect-only", "-q", "-m", "both_stacks",
                           "tests/core", "tests/cli"], cwd=ROOT, capture_output=True,
                          text=True, check=False, timeout=300)
    collected = proc.stdout
    assert "tests/core/test_compat.py::" in collected, collected
    assert "tests/cli/test_crash_everywhere.py::" in collected
    assert "tests/cli/test_cli.py::" not in collected  # version-free: first stack only


def test_suite_xla_flags_add_only_what_is_not_set():
    conftest = load_repo_conftest()
    assert conftest._suite_xla_flags("") == " ".join(conftest.SUITE_XLA_FLAGS)
    mine = "--xla_backend_optimization_level=2 --xla_dump_to=/tmp/x"
    merged = conftest._suite_xla_flags(mine).split()
    assert merged[:2] == mine.split()
    assert "--xla_backend_optimization_level=0" not in merged
    assert "--xla_llvm_disable_expensive_passes=true" in merged


def test_the_emitter_flag_is_set_only_where_this_jaxlib_knows_it():
    """An XLA flag the installed jaxlib does not know aborts every process of the suite."""
    from kernel_harness.core.compat import xla_flags

    conftest = load_repo_conftest()
    emitters = "--xla_cpu_use_fusion_emitters=false"
    assert xla_flags.fast_cpu_compile_flags((0, 10)) == (emitters,)
    assert xla_flags.fast_cpu_compile_flags((0, 12)) == ()
    assert xla_flags.fast_cpu_compile_flags((9, 0)) == ()  # unchecked: nothing that may abort
    assert set(xla_flags.fast_cpu_compile_flags()) <= set(conftest.SUITE_XLA_FLAGS)
    # This process (and every CLI subprocess the suite starts) runs with them, and lives.
    named = {f.split("=", 1)[0] for f in os.environ["XLA_FLAGS"].split()}
    assert {f.split("=", 1)[0] for f in conftest.SUITE_XLA_FLAGS} <= named
    assert xla_flags.jaxlib_version() in xla_flags.FAST_CPU_COMPILE_FLAGS, (
        "a jaxlib this table has not seen: check which of its flags its XLA accepts "
        "(XLA_FLAGS=FLAG python -c 'import jax; jax.devices()') and add its entry")


def test_second_stack_goldens_name_registered_families_and_ci_gates_exactly_them():
    """One stack per family per push for goldens: each name is a registered family, and
    .ci/run's second-stack gate reads the list from conftest (no second copy to drift)."""
    from kernel_harness import family_names, get_family

    conftest = load_repo_conftest()
    unknown = set(conftest.SECOND_STACK_GOLDENS) - set(family_names())
    assert not unknown, f"conftest.SECOND_STACK_GOLDENS names no family: {sorted(unknown)}"
    if sys.version_info < (3, 12):  # the first stack: exactly its families without a backend
        # (torch-sdpa aside: it needs the [torch] extra, which neither CI stack installs)
        assert set(conftest.SECOND_STACK_GOLDENS) == {
            n for n in family_names() if not get_family(n).backends
            and "kernel-harness[torch]" not in get_family(n).requires}
    script = (ROOT / ".ci" / "run").read_text()
    # Split between the two lanes: lane 1 the families it names, lane 2 the others.
    first = re.search(r'^SECOND_STACK_IN_LANE1="([^"]*)"$', script, re.M)
    assert first and set(first.group(1).split()) < set(conftest.SECOND_STACK_GOLDENS), first
    assert "for f in conftest.SECOND_STACK_GOLDENS if (f in first) == (lane == \"1\")" in script
    assert "kernel-harness gate --goldens $families" in script
    assert "second_stack_goldens_and_gate 1; }" in script
    assert "lane2() { second_stack_goldens_and_gate 2; }" in script
