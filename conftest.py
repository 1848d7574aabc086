"""Top-level pytest configuration of the harness's own repository (not installed).

The installed plugin (``kernel_harness.plugin``) registers options only and no
Hypothesis profile. This repository's own tests want the harness profiles under
their short names, so ``--hypothesis-profile ci`` (as in ``.ci/run``) works here:
they are registered for this repository alone, and ``dev`` is loaded unless a
profile is named. The property tests apply the harness profile to themselves
either way (``kh_profile``).

Speed (docs/ci.md, "How CI stays fast"): ``$KERNEL_HARNESS_TEST_COMPILE_CACHE=DIR`` turns on
JAX's persistent compile cache for the suite's own processes (every xdist worker shares DIR;
``.ci/run`` points it at a fresh folder of its own, so one run's repeated programs compile
once); the terminal summary then says how many compiles it served. Under ``-n``, xdist
schedules by ``worksteal`` unless ``--dist`` is given, and the files that compile the most run
first, so neither core idles at the end waiting on one long file. Tests marked ``nightly``
are deselected unless ``-m`` names the marker (``pytest -m nightly``, the nightly recipe); the
summary says how many were left to it.
"""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from kernel_harness.core.compat.xla_flags import fast_cpu_compile_flags
from kernel_harness.core.devices import DEFAULT_CPU_DEVICES
from kernel_harness.run import profiles

#: XLA's CPU compiler at its cheapest settings for this suite's own processes (and the CLI
#: subprocesses they start, which inherit the environment). Most of the suite's time is XLA
#: compiling interpret-mode kernels; LLVM's optimisation passes cost about a fifth of an hstu
#: check. Where running dominates (flash's large cases) the unoptimised code runs slower and
#: the two roughly cancel (docs/ci.md, "How CI stays fast"). Where this jaxlib's XLA has them,
#: its older CPU emitters too (``core/compat/xla_flags.py``; jaxlib 0.10: properties/ at the
#: dev size in 2 min 14 s instead of 3 min 35 s). Fast-math stays off, so no pass may
#: reorder float arithmetic; the emitters may vectorize a reduction differently (up to about
#: a float32 ulp of an output, far inside every tolerance). A user's XLA_FLAGS that already
#: set a flag win. The pytest header prints what the suite set.
#: And the simulated CPU devices the harness's own processes start with
#: (``core/devices.py``), so the collective families run in the suite's process too.
SUITE_XLA_FLAGS = ("--xla_backend_optimization_level=0",
                   "--xla_llvm_disable_expensive_passes=true", *fast_cpu_compile_flags(),
                   f"--xla_force_host_platform_device_count={DEFAULT_CPU_DEVICES}")


def _suite_xla_flags(current: str) -> str:
    """``current`` XLA_FLAGS with each of SUITE_XLA_FLAGS added unless it names that flag."""
    flags = current.split()
    named = {f.split("=", 1)[0] for f in flags}
    flags += [f for f in SUITE_XLA_FLAGS if f.split("=", 1)[0] not in named]
    return " ".join(flags)


os.environ["XLA_FLAGS"] = _suite_xla_flags(os.environ.get("XLA_FLAGS", ""))

# The suite's in-process CLI runs must not write to (or read from) the user's compile cache,
# nor to the one .ci/run exports for its CLI steps; tests of the cache pass their own directory.
os.environ["KERNEL_HARNESS_COMPILE_CACHE"] = "off"
TEST_CACHE_VAR = "KERNEL_HARNESS_TEST_COMPILE_CACHE"
_cache_counts = {"hits": 0, "misses": 0, "saved_s": 0.0}


def _enable_suite_compile_cache(path: str) -> None:
    """JAX's persistent cache for this process (before anything compiles). The CLI's own
    switch stays "off", so the suite's output is unchanged; a cached executable is the same
    program (keyed by the lowered program), so no test sees a different kernel."""
    import jax
    from jax import monitoring

    from kernel_harness.run import compile_cache

    Path(path).mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs",
                      compile_cache.MIN_COMPILE_SECONDS)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)

    def count(event: str, **_: object) -> None:
        if event == "/jax/compilation_cache/cache_hits":
            _cache_counts["hits"] += 1
        elif event == "/jax/compilation_cache/cache_misses":
            _cache_counts["misses"] += 1

    def saved(event: str, seconds: float, **_: object) -> None:
        if event == "/jax/compilation_cache/compile_time_saved_sec":
            _cache_counts["saved_s"] += seconds

    monitoring.register_event_listener(count)
    monitoring.register_event_duration_secs_listener(saved)


if os.environ.get(TEST_CACHE_VAR, "").strip().lower() not in ("", "off", "none", "0"):
    _enable_suite_compile_cache(os.environ[TEST_CACHE_VAR])

for _name in profiles.PROFILE_NAMES:
    settings.register_profile(_name, profiles.get_profile(_name))
settings.load_profile("dev")


@pytest.fixture(autouse=True)
def _family_modules_do_not_leak() -> Iterator[None]:
    """Loading an out-of-tree family records its module in $KERNEL_HARNESS_FAMILY_MODULES
    (so child processes find it); one test's family must not reach the next test's
    subprocesses, where it may not be importable."""
    before = os.environ.get("KERNEL_HARNESS_FAMILY_MODULES")
    yield
    if before is None:
        os.environ.pop("KERNEL_HARNESS_FAMILY_MODULES", None)
    else:
        os.environ["KERNEL_HARNESS_FAMILY_MODULES"] = before


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """``-n N`` without ``--dist``: ``worksteal`` (an idle worker takes half of the other's
    queue) instead of xdist's ``load``, which hands out fixed chunks."""
    if getattr(config.option, "numprocesses", None) and config.option.dist == "no":
        config.option.dist = "worksteal"


#: Test files whose subject is version-specific jax/Pallas behaviour (core/compat, the TPU
#: interpreter and its extensions, lowering, crash origins, memory maps, the compile cache,
#: exported scripts that import jax themselves). They carry the ``both_stacks`` marker: the
#: second stack of ``.ci/run`` runs these (``-m both_stacks``) beside every family's
#: dev-profile check, goldens and gate; the nightly recipe runs the whole suite there
#: (docs/ci.md, "Two jax stacks"). tests/test_suite_conftest.py checks that each path exists.
BOTH_STACKS = (
    "tests/core/test_compat.py",
    "tests/core/test_pallas_poison.py",
    "tests/core/test_interpreter_ext.py",
    "tests/core/test_backends.py",
    "tests/core/test_backend_schedule.py",
    "tests/checks/test_schedule_invariance.py",
    "tests/checks/test_crash_origin.py",
    "tests/checks/test_lowering.py",
    "tests/run/test_diagnostics.py",
    "tests/run/test_kernel_coverage.py",
    "tests/run/test_kernel_core.py",  # the flow through kernel bodies (compat.kernel_flow)
    "tests/run/test_memory_maps.py",
    "tests/run/test_compile_cache.py",
    "tests/run/test_crash.py",
    "tests/cli/test_crash_everywhere.py",
    "tests/families/hstu/test_hstu_backends.py",
    "tests/families/tpu_ragged_paged/",
    "tests/families/tpu_all_gather/",
    "tests/families/tpu_inference_agmm/",
    "tests/families/tpu_inference_rpa_hd64/",
    "tests/regression/test_export.py",
    "tests/ops/test_attention_designs.py",  # the precision designs' roundings (2-3 s)
)
_ROOT = Path(__file__).resolve().parent

#: Families whose golden cases, per push, only the second stack checks (``.ci/run``'s
#: ``gate --goldens`` names exactly these): those with no backend on the first stack (the
#: kernel libraries that need Python >= 3.12; the head_dim-64 RPA, which needs jax >= 0.11).
#: Every other family's goldens run per push on the first stack only; nightly, both stacks
#: check every family's goldens (docs/ci.md, "Two jax stacks"). One stack per family per
#: push: checking every family's goldens on both per push had made CI the sum of two golden
#: runs. tests/test_suite_conftest.py checks the list against the first stack's families.
SECOND_STACK_GOLDENS: tuple[str, ...] = (
    "tpu-inference-rpa-v3-hd64", "deltanet-tpu-gdn2", "deltanet-tpu-gdn2-bf16",
    "flywheel-tpu-kv-cache-write", "flywheel-tpu-rotary", "flywheel-tpu-flash",
    "flywheel-tpu-paged-decode", "flywheel-tpu-ragged-append", "flywheel-tpu-varlen",
    "flywheel-tpu-varlen-paged", "flywheel-tpu-gdn", "flywheel-tpu-kda",
)


def _both_stacks(item: pytest.Item) -> bool:
    path = Path(str(item.path)).resolve()
    if _ROOT not in path.parents:
        return False
    rel = path.relative_to(_ROOT).as_posix()
    return any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in BOTH_STACKS)


#: Files that compile the most (measured: docs/ci.md), run first so the short tests fill the
#: end of the run on both cores. The property and golden tests of every family come first.
HEAVY_FIRST = ("properties/",)


def _weight(item: pytest.Item) -> int:
    path = Path(str(item.path)).as_posix()
    for rank, prefix in enumerate(HEAVY_FIRST):
        if f"/{prefix}" in path:
            return rank
    return len(HEAVY_FIRST) + (0 if item.get_closest_marker("slow") else 1)


def _nightly_selected(config: pytest.Config) -> bool:
    return "nightly" in (config.option.markexpr or "")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``both_stacks`` on the files BOTH_STACKS names; nightly tests left to the nightly recipe
    (unless ``-m`` names them), then the heavy files first; a file's tests keep their order
    and stay together (module fixtures)."""
    for item in items:
        if _both_stacks(item):
            item.add_marker(pytest.mark.both_stacks)
    if not _nightly_selected(config):
        nightly = [i for i in items if i.get_closest_marker("nightly")]
        if nightly:
            config.hook.pytest_deselected(items=nightly)
            config.stash[_NIGHTLY] = len(nightly)
            items[:] = [i for i in items if not i.get_closest_marker("nightly")]
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(str(item.path), []).append(item)
    order = sorted(files.values(), key=lambda group: min(_weight(i) for i in group))
    items[:] = [i for group in order for i in group]


_NIGHTLY = pytest.StashKey[int]()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker hands its compile-cache counts to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["kh_compile_cache"] = dict(_cache_counts)
        workeroutput["kh_nightly"] = session.config.stash.get(_NIGHTLY, 0)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:  # xdist's hook: a worker finished
    """A worker's compile-cache counts and the nightly tests it left out reach the
    controller, whose summary says them (the workers collect; the controller does not)."""
    # Every worker collects the whole suite: each left out the same nightly tests.
    left = getattr(node, "workeroutput", {}).get("kh_nightly", 0)
    node.config.stash[_NIGHTLY] = max(node.config.stash.get(_NIGHTLY, 0), left)
    counts = getattr(node, "workeroutput", {}).get("kh_compile_cache")
    if counts:
        for key, value in counts.items():
            _cache_counts[key] += value


def pytest_report_header(config: pytest.Config) -> str:
    """The XLA flags the suite's processes run with (SUITE_XLA_FLAGS merged into the user's)."""
    return f"XLA_FLAGS (suite): {os.environ['XLA_FLAGS']}"


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """What was left to the nightly recipe, and what the suite's compile cache served."""
    left = config.stash.get(_NIGHTLY, 0)
    if left:
        terminalreporter.write_line(
            f"{left} test(s) marked nightly not run here: the nightly recipe runs them "
            "(pytest -m nightly; docs/ci.md)")
    if os.environ.get(TEST_CACHE_VAR, "").strip().lower() not in ("", "off", "none", "0"):
        c = _cache_counts
        terminalreporter.write_line(
            f"suite compile cache {os.environ[TEST_CACHE_VAR]}: {c['hits']} hits, "
            f"{c['misses']} new entries, {c['saved_s']:.0f}s of compiling saved")



_worker = {"is": False}


def pytest_configure(config: pytest.Config) -> None:
    _worker["is"] = hasattr(config, "workerinput")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """``$KERNEL_HARNESS_TEST_DURATIONS=FILE``: each test phase's seconds appended to FILE as it
    ends (tab-separated nodeid, phase, seconds, outcome), readable while a long run goes on
    (how docs/ci.md measured the suite). Written by the xdist controller (or the only process)."""
    target = os.environ.get("KERNEL_HARNESS_TEST_DURATIONS")
    if target and not _worker["is"]:
        with open(target, "a") as f:
            f.write(f"{report.nodeid}\t{report.when}\t{report.duration:.3f}\t{report.outcome}\n")
