"""Kernel-branch coverage on a small Pallas kernel whose branches are known: the outcomes seen
and missed are asserted exactly (on both interpreters), outputs are bitwise identical with
coverage on and off, and no program lowered one way is run the other way (in-memory and
persistent caches). A jax whose internals moved fails here, loudly."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl

from kernel_harness.core.compat import (
    forced_tpu_interpret_mode,
    kernel_probes,
    tpu_interpret_params,
)
from kernel_harness.run.kernel_coverage import KernelCoverage, recording


def _known_kernel(x_ref, n_ref, o_ref):
    i = pl.program_id(0)
    x = x_ref[...]

    @pl.when(i == 0)
    def _first():
        o_ref[...] = jnp.where(x > 0, x, 0.0)  # x > 0 everywhere: all-true only

    @pl.when(i > 5)
    def _never():
        o_ref[...] = jnp.where(x > 1e9, x, 1.0)  # never reached

    @pl.when(i == 1)
    def _second():
        o_ref[...] = lax.fori_loop(0, n_ref[0], lambda k, a: a + 1.0, x)  # n = 3 trips


def _known(x, n):
    return pl.pallas_call(
        _known_kernel, grid=(2,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0)), pl.BlockSpec((1,), lambda i: (0,))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32), interpret=True)(x, n)


X = np.linspace(0.5, 3.0, 16 * 128, dtype=np.float32).reshape(16, 128)
N = np.array([3], np.int32)
FORI = "lax.fori_loop(0, n_ref[0]"

#: (detail, source fragment, outcome) -> seen; every probed outcome of the kernel.
EXPECTED = {
    ("eq", "@pl.when(i == 0)", "false"): True, ("eq", "@pl.when(i == 0)", "true"): True,
    ("cond/2", "@pl.when(i == 0)", "false"): True, ("cond/2", "@pl.when(i == 0)", "true"): True,
    ("select_n", "jnp.where(x > 0,", "all-true"): True,
    ("select_n", "jnp.where(x > 0,", "all-false"): False,
    ("select_n", "jnp.where(x > 0,", "mixed"): False,
    ("gt", "@pl.when(i > 5)", "false"): True, ("gt", "@pl.when(i > 5)", "true"): False,
    ("cond/2", "@pl.when(i > 5)", "false"): True, ("cond/2", "@pl.when(i > 5)", "true"): False,
    ("select_n", "jnp.where(x > 1e9,", "all-true"): False,
    ("select_n", "jnp.where(x > 1e9,", "all-false"): False,
    ("select_n", "jnp.where(x > 1e9,", "mixed"): False,
    ("eq", "@pl.when(i == 1)", "false"): True, ("eq", "@pl.when(i == 1)", "true"): True,
    ("cond/2", "@pl.when(i == 1)", "false"): True, ("cond/2", "@pl.when(i == 1)", "true"): True,
    ("while", FORI, "0 trips"): False, ("while", FORI, "1 trip"): False,
    ("while", FORI, "2+ trips"): True,
}


def _fragment(source: str) -> str:
    found = next((f for _, f, _ in EXPECTED if f in source), None)
    assert found is not None, f"a probe site at a line of no known branch: {source!r}"
    return found


def _observed(cov: KernelCoverage) -> dict[tuple[str, str, str], bool]:
    out = {}
    for site in cov.sites.values():
        assert site.kernel == "_known_kernel" and site.file == __file__, site
        for outcome, count in site.counts.items():
            out[(site.detail, _fragment(site.source), outcome)] = count > 0
    return out


def _run_known(backend: str) -> tuple[np.ndarray, KernelCoverage]:
    f = jax.jit(_known)
    if backend == "tpu-interpret":
        with forced_tpu_interpret_mode(tpu_interpret_params()), recording() as cov:
            return np.asarray(f(X, N)), cov
    with recording() as cov:
        return np.asarray(f(X, N)), cov


@pytest.mark.parametrize("backend", ["interpret", "tpu-interpret"])
def test_known_kernel_hit_and_missed_sets_exactly(backend):
    _, cov = _run_known(backend)
    assert cov.kernels == {"_known_kernel"} and not cov.uninstrumented_kernels
    assert _observed(cov) == EXPECTED
    counts = {(s.detail, _fragment(s.source)): s.counts for s in cov.sites.values()}
    assert counts[("cond/2", "@pl.when(i == 0)")] == {"false": 1, "true": 1}
    assert counts[("while", FORI)] == {"0 trips": 0, "1 trip": 0, "2+ trips": 1}
    missing = cov.missing()
    assert len(missing) == sum(not seen for seen in EXPECTED.values())
    table = cov.table({"*`@pl.when(i > 5)` -> true": "i never exceeds 1 (grid of 2)"})
    assert table.index("MISSING (") < table.index("expected missing") < table.index("all sites")
    assert "i never exceeds 1" in table and "-> all-false" in table


@jax.custom_vjp
def _doubled(x):
    return x * 2.0


def _doubled_fwd(x):
    return _doubled(x), None


def _doubled_bwd(_, g):
    return (_known(g, N),)  # a kernel traced in jax.vjp's backward pass, like splash's dq/dkv


_doubled.defvjp(_doubled_fwd, _doubled_bwd)


def test_a_kernel_traced_in_the_backward_pass_keeps_its_own_source_lines():
    """jax traces the backward under the forward's source context; without the real stack
    every site would carry this test's ``vjp`` line instead of the kernel's lines."""
    grad = jax.jit(lambda x: jax.vjp(_doubled, x)[1](x)[0])
    with recording() as cov:
        out = np.asarray(grad(X))
    assert _observed(cov) == EXPECTED
    assert out.tobytes() == np.asarray(jax.jit(_known)(X, N)).tobytes()


def test_outputs_bitwise_identical_with_coverage_on_and_off():
    off = np.asarray(jax.jit(_known)(X, N))
    on, cov = _run_known("interpret")
    assert cov.total_hits() > 0
    assert off.tobytes() == on.tobytes()
    expected = np.where(np.arange(16)[:, None] < 8, X, X + 3.0)
    assert off.tobytes() == expected.astype(np.float32).tobytes()


def test_toggling_never_reuses_a_program_lowered_the_other_way():
    f = jax.jit(_known)
    f(X, N)  # lowered and compiled without probes
    with recording() as first:
        f(X, N)
    hits = first.total_hits()
    assert hits > 0, "a program lowered without probes ran inside recording()"
    f(X, N)
    assert first.total_hits() == hits, "a program lowered with probes ran after recording()"
    with recording() as second:
        f(X, N)
    assert second.total_hits() == hits


PERSISTENT = textwrap.dedent('''
    import sys, jax, numpy as np
    from kernel_harness.run import compile_cache
    compile_cache.enable(sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    sys.path.insert(0, sys.argv[2])
    import test_kernel_coverage as t
    from kernel_harness.run.kernel_coverage import recording
    f = jax.jit(t._known)
    f(t.X, t.N)
    with recording() as cov:
        f(t.X, t.N)
    on = cov.total_hits()
    f(t.X, t.N)
    print("hits", on, cov.total_hits())
''')


def test_persistent_compile_cache_never_serves_the_other_lowering(tmp_path):
    """Two fresh processes share a persistent cache: the second finds the plain program
    cached, yet inside recording() it still runs with probes, and none after."""
    import os

    here = os.path.dirname(__file__)
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", PERSISTENT, str(tmp_path / "cache"), here],
                              capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        _, on, after = proc.stdout.split()[-3:]
        assert int(on) > 0 and int(after) == int(on), proc.stdout
    assert any((tmp_path / "cache").iterdir()), "the persistent cache was not written"


def test_unknown_layout_is_a_loud_error_naming_jax(monkeypatch):
    from jax._src.pallas import pallas_call as pallas_call_mod

    monkeypatch.delattr(pallas_call_mod, "pallas_call_p")
    with pytest.raises(kernel_probes.KernelProbeLayoutError, match=jax.__version__), \
            recording():
        pass


def test_coverage_refuses_a_compiled_backend_and_merges_worker_recordings():
    from kernel_harness.core.errors import UsageError
    from kernel_harness.run.kernel_coverage import KernelCoverage, check_backend

    check_backend("interpret")
    with pytest.raises(UsageError, match="interpreted backend"):
        check_backend("tpu")
    with recording() as cov:
        jax.jit(_known)(X, N)
    assert cov.total_hits() > 0
    merged = KernelCoverage()
    merged.absorb(cov.to_json())
    merged.absorb(cov.to_json())  # two workers that ran the same kernel add up
    assert merged.total_hits() == 2 * cov.total_hits()
    assert merged.missing() == cov.missing()
