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
summary says how many were left to it. On a jax without its Pallas Triton ops (jax >= 0.12.1)
the tests that need them are skipped with the reason (``TRITON_OPS_TESTS``).
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
    "tests/core/test_gpu_ops.py",  # the Pallas Triton ops, present or not (compat.gpu_ops)
    "tests/run/test_impl_source_families.py",  # the libraries of the second stack not read
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
    rel = _rel(item)
    return rel is not None and any(rel == p or (p.endswith("/") and rel.startswith(p))
                                   for p in BOTH_STACKS)


#: The families that wrap jax's Pallas Triton ops (``jax.experimental.pallas.ops.gpu``:
#: attention, decode_attention, paged_attention, layer_norm, rms_norm, softmax), which jax
#: 0.12.1 removed (deprecated for tokamax): on a jax without them these have no backend, and
#: tests/core/test_gpu_ops.py checks they are exactly the families that lose theirs there.
TRITON_OPS_FAMILIES: tuple[str, ...] = (
    "gpu-mha", "gpu-decode", "gpu-paged", "gpu-norm", "gpu-softmax")

#: Test paths whose every test needs those ops (the families' own tests). On a stack
#: without them each of these tests, each test marked ``triton_ops`` and each parametrised by
#: one of those families is skipped with the reason (:func:`triton_ops_missing`); a test
#: module that cannot even be imported there (it, or a helper it imports, imports the ops at
#: top level) is skipped whole, with the same reason (:class:`_TritonOpsModule`). Any other
#: error still fails, and on a jax with the ops nothing is skipped.
TRITON_OPS_TESTS = (
    "tests/families/gpu/", "tests/families/gpu_mha/", "tests/families/gpu_norm/",
    "tests/families/gpu_softmax/",
    # Whole files where nearly every test runs gpu-softmax (13 of 14; 2 of 3): their tests
    # could carry the marker one by one instead.
    "tests/run/test_kernel_count.py", "tests/run/test_rerun.py",
)
_TRITON_OPS_REASON: list[str] = []


def triton_ops_missing() -> str:
    """Why this stack cannot run the tests that need jax's Pallas Triton ops, naming the
    stack and the missing ops; "" where it has them all."""
    if not _TRITON_OPS_REASON:
        import sys

        import jax

        from kernel_harness.core.compat import gpu_ops

        missing = gpu_ops.missing_gpu_ops()
        stack = f"Python {sys.version_info.major}.{sys.version_info.minor}, jax {jax.__version__}"
        _TRITON_OPS_REASON.append(
            f"needs jax's Pallas Triton ops, which this stack ({stack}) lacks: "
            f"{gpu_ops.PACKAGE} has no {', '.join(missing)} (jax 0.12.1 removed them, "
            f"deprecated for tokamax); runs on jax <= {gpu_ops.LAST_JAX_WITH_TRITON_OPS}"
            if missing else "")
    return _TRITON_OPS_REASON[0]


def _rel(item: pytest.Item) -> str | None:
    path = Path(str(item.path)).resolve()
    return path.relative_to(_ROOT).as_posix() if _ROOT in path.parents else None


def _needs_triton_ops(item: pytest.Item) -> bool:
    """Marked ``triton_ops``, under TRITON_OPS_TESTS, or parametrised by one of
    TRITON_OPS_FAMILIES (a family name as a parameter, a parameter's ``name`` or ``family``,
    or in the parameters' id: ``test_lowering.py::...[gpu-mha]``)."""
    rel = _rel(item) or ""
    if item.get_closest_marker("triton_ops") or any(
            rel == p or (p.endswith("/") and rel.startswith(p)) for p in TRITON_OPS_TESTS):
        return True
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return False
    values = [v for p in callspec.params.values()
              for v in (p, getattr(p, "name", None), getattr(p, "family", None))]
    return (any(isinstance(v, str) and v in TRITON_OPS_FAMILIES for v in values)
            or any(name in callspec.id for name in TRITON_OPS_FAMILIES))


def _lacks_triton_op(error: BaseException | None) -> bool:
    """Whether ``error`` (or an exception it was raised from) is the import of one of jax's
    Pallas GPU op modules failing because this jax has none."""
    from kernel_harness.core.compat import gpu_ops

    while error is not None:
        if isinstance(error, ImportError) and (error.name or "").startswith(gpu_ops.PACKAGE):
            return True
        error = error.__cause__ or error.__context__
    return False


class _TritonOpsModule(pytest.Module):
    """A test module that does not import only because this jax lacks the Pallas Triton ops
    is skipped whole, with the reason, instead of erroring at collection."""

    def _getobj(self):  # pytest's documented override point of the module object
        try:
            return super()._getobj()
        except self.CollectError as e:
            if _lacks_triton_op(e.__cause__) and triton_ops_missing():
                where = Path(str(self.path)).name
                raise pytest.skip.Exception(f"{where} does not import here: it "
                                            f"{triton_ops_missing()}",
                                            allow_module_level=True) from None
            raise


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module:
    """Every test module is a :class:`_TritonOpsModule` (pytest's own Module otherwise)."""
    return _TritonOpsModule.from_parent(parent, path=module_path)


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
    """``both_stacks`` on the files BOTH_STACKS names; on a jax without the Pallas Triton ops,
    the tests that need them skipped with the reason; nightly tests left to the nightly
    recipe (unless ``-m`` names them), then the heavy files first; a file's tests keep their
    order and stay together (module fixtures)."""
    for item in items:
        if _both_stacks(item):
            item.add_marker(pytest.mark.both_stacks)
        if _needs_triton_ops(item) and triton_ops_missing():
            item.add_marker(pytest.mark.skip(reason=triton_ops_missing()))
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
    config.addinivalue_line("markers", "triton_ops: needs jax's Pallas Triton ops "
                            "(jax.experimental.pallas.ops.gpu; jax <= 0.12.0.1): skipped with "
                            "the reason on a jax without them (conftest.TRITON_OPS_TESTS)")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """``$KERNEL_HARNESS_TEST_DURATIONS=FILE``: each test phase's seconds appended to FILE as it
    ends (tab-separated nodeid, phase, seconds, outcome), readable while a long run goes on
    (how docs/ci.md measured the suite). Written by the xdist controller (or the only process)."""
    target = os.environ.get("KERNEL_HARNESS_TEST_DURATIONS")
    if target and not _worker["is"]:
        with open(target, "a") as f:
            f.write(f"{report.nodeid}\t{report.when}\t{report.duration:.3f}\t{report.outcome}\n")
