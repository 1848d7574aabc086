"""Round 7's and round 8's spellings of the adversarial set (2026-12-06): state, platform
branches, the process or host, jax's configuration, concrete-only attributes, aliased
arguments; each named by the source check with its kind, the honest neighbours not; and
jax's configuration set by a call, by a name no rule reads, failed by the example and put
back."""

from __future__ import annotations

import functools
import itertools
import os
import sys

import jax
import jax.numpy as jnp

from kernel_harness.core.backends import resolve_backend
from kernel_harness.run import impl_source, source_rules
from kernel_harness.run.report import summary_lines
from kernel_harness.run.runner import check_case
from tests.helpers import rope_family
from tests.helpers.rope_kernel import rope


def _on_accelerator() -> bool:
    return jax.devices()[0].platform != "cpu"


def platform_helper(x):
    """The test sits in a helper whose return value reads the device's platform."""
    return x.astype(jnp.bfloat16) if _on_accelerator() else x


def backend_helper(x):
    on_tpu = jax.default_backend() == "tpu"  # no branch here: the value is read
    return x * (1 if on_tpu else 1)


_TICK = itertools.count().__next__


def bound_counter(x):
    return x if _TICK() < 1000 else -x


@functools.cache
def _seen(n):
    return n


def cache_stats_bomb(x):
    _seen(x.shape[-1])
    return x if _seen.cache_info().currsize < 600 else -x


def directory_marker(x):
    key = "/tmp/kernel-harness-test-marker"
    seen = os.path.isdir(key) and bool(os.listdir(key))
    os.makedirs(key, exist_ok=True)
    return -x if seen else x


def global_precision(x):
    jax.config.update("jax_default_matmul_precision", "bfloat16")
    return x


def by_pid(x):
    return x if os.getpid() % 61 != 17 else -x


def by_environment(x):
    return -x if "," in os.environ.get("TPU_WORKER_HOSTNAMES", "") else x


def by_x64(x):
    return -x if jax.config.jax_enable_x64 else x


def _eager(x):
    return hasattr(x, "copy_to_host_async")


def eager_by_attribute(x):
    return -x if _eager(x) else x


def aliased(q, k):
    return -q if q is k else q


def test_round_8_spellings_are_named():
    expected = {by_pid: source_rules.known.PROCESS_KIND,
                by_environment: source_rules.known.PROCESS_KIND,
                by_x64: source_rules.known.CONFIG_KIND,
                eager_by_attribute: source_rules.TRACED,
                aliased: source_rules.known.ALIASING_KIND}
    for impl, kind in expected.items():
        assert {f.kind for f in impl_source.findings(impl)} == {kind}, impl
        assert kind in source_rules.KINDS  # a user may accept such a line by its kind


def test_round_7_spellings_are_named():
    assert {f.kind for f in impl_source.findings(platform_helper)} == {source_rules.BACKEND}
    assert {f.kind for f in impl_source.findings(backend_helper)} == {source_rules.BACKEND}
    for impl in (bound_counter, cache_stats_bomb, directory_marker, global_precision):
        found = impl_source.findings(impl)
        assert {f.kind for f in found} == {source_rules.STATE}, (impl, found)
    what = " ".join(f.what for f in impl_source.findings(directory_marker))
    assert "os.path.isdir" in what or "os.listdir" in what


def _honest_neighbours(x, bias=None):
    """What is left alone: the OS's platform, a device's generation, a cache not counted,
    an argument compared with None, the precision context passed on."""
    wide = sys.platform.startswith("linux") and jax.devices()[0].device_kind != "TPU v2"
    if bias is None:
        bias = x
    return _seen(x.shape[-1]) * (1 if wide else 1) + bias


def test_honest_neighbours_are_not_named():
    assert impl_source.findings(_honest_neighbours) == ()


def _config_by_computed_name(x, cos, sin, *, block_rows, interpret=False):
    setter = getattr(jax.config, "up" + "date")  # no rule reads this spelling
    setter("jax_default_matmul_precision", "bfloat16")
    return rope(x, cos, sin, block_rows=block_rows, interpret=interpret)


def test_a_call_that_changes_jax_config_fails_and_the_value_is_put_back():
    """(The rope family: a kernel of the project's own, on both stacks.)"""
    family, backend = rope_family.FAMILY, resolve_backend("interpret")
    case = rope_family.RopeCase(dtype="float32", seed=3, rows=40, width=64, block_rows=8)
    before = jax.config.values["jax_default_matmul_precision"]
    result = check_case(family, case, backend, _config_by_computed_name)
    assert jax.config.values["jax_default_matmul_precision"] == before
    assert not result.passed and all(v.passed for v in result.verdicts)
    first = summary_lines(result)[0]
    assert "suspicious source (keeps state across calls)" in first, first
    assert "jax_default_matmul_precision: None -> 'bfloat16'" in first, first
    assert check_case(family, case, backend, rope).passed
