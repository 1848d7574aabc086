"""The persistent compile cache: a rerun hits it, an edited kernel source misses it, and
``off`` disables it. Each run is a fresh process (JAX also caches in memory)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from kernel_harness.run import compile_cache

KERNEL = textwrap.dedent('''
    import jax, jax.numpy as jnp
    from jax.experimental import pallas as pl

    def _kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0 + 1.0

    def toy(x):
        return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                              interpret=True)(x)
''')

RUNNER = textwrap.dedent('''
    import sys, jax, jax.numpy as jnp, numpy as np
    from jax import monitoring
    from kernel_harness.run import compile_cache
    print(compile_cache.enable(sys.argv[1]))
    # The toy compiles in milliseconds; write it anyway (the keying is what is tested).
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    counts = {"hits": 0, "misses": 0}
    def listen(event, **kwargs):
        if event == "/jax/compilation_cache/cache_hits":
            counts["hits"] += 1
        if event == "/jax/compilation_cache/cache_misses":
            counts["misses"] += 1
    monitoring.register_event_listener(listen)
    sys.path.insert(0, sys.argv[2])
    import toy_kernel
    y = jax.jit(toy_kernel.toy)(jnp.arange(8.0).reshape(1, 8))
    print("result", np.asarray(y).ravel().tolist())
    print("hits", counts["hits"], "misses", counts["misses"])
''')


def _run(tmp_path, cache: str) -> tuple[int, int, str]:
    proc = subprocess.run([sys.executable, "-c", RUNNER, cache, str(tmp_path / "src")],
                          capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip().splitlines()[-1].split()
    return int(line[1]), int(line[3]), proc.stdout


def test_rerun_hits_and_an_edited_kernel_misses(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "toy_kernel.py").write_text(KERNEL)
    cache = str(tmp_path / "cache")

    hits, misses, out = _run(tmp_path, cache)
    assert hits == 0 and misses >= 1, out
    assert "result [1.0, 3.0, 5.0" in out
    entries = set((tmp_path / "cache").iterdir())
    assert entries

    hits, misses, out = _run(tmp_path, cache)  # unchanged source: served from the cache
    assert hits >= 1 and misses == 0, out

    (src / "toy_kernel.py").write_text(KERNEL.replace("* 2.0 + 1.0", "* 2.0 + 2.0"))
    hits, misses, out = _run(tmp_path, cache)  # edited kernel: a new program, a miss
    assert misses >= 1, out
    assert "result [2.0, 4.0, 6.0" in out  # the edit ran, not the stale program
    assert set((tmp_path / "cache").iterdir()) > entries


def test_off_disables_the_cache(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "toy_kernel.py").write_text(KERNEL)
    hits, misses, out = _run(tmp_path, "off")
    assert "compile cache off" in out and hits == 0 and misses == 0


def test_resolve_flag_env_and_default(monkeypatch, tmp_path):
    monkeypatch.delenv(compile_cache.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert compile_cache.resolve(None) == tmp_path / "kernel-harness" / "jax-compile-cache"
    monkeypatch.setenv(compile_cache.ENV_VAR, str(tmp_path / "elsewhere"))
    assert compile_cache.resolve(None) == tmp_path / "elsewhere"
    assert compile_cache.resolve(str(tmp_path / "flag")) == tmp_path / "flag"  # flag wins
    monkeypatch.setenv(compile_cache.ENV_VAR, "off")
    assert compile_cache.resolve(None) is None
    assert compile_cache.resolve("OFF") is None


@pytest.mark.parametrize("value", ["off", ""])
def test_enable_off_changes_no_config(value):
    import jax

    before = jax.config.jax_compilation_cache_dir
    assert compile_cache.enable(value) == "compile cache off"
    assert jax.config.jax_compilation_cache_dir == before
