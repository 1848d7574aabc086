"""Sharded execution on a simulated 4-device CPU mesh (in subprocesses: the device count
must be set before jax initializes): the real families pass, a planted kernel that bakes
the unsharded head count into its math fails."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from kernel_harness.checks import sharding

SCRIPT = textwrap.dedent("""
    from kernel_harness.core import compat
    compat.set_cpu_device_count(4)
    import dataclasses, jax
    from kernel_harness.checks import sharding
    from tests.helpers import planted_kernels as pk
    assert len(jax.devices("cpu")) == 4
    case = pk.ToyAttentionCase(dtype="float32", seed=3, heads=2, causal=True,
                               segments=((0, 100), (1, 156)))
    good = sharding.run_sharded(pk.TOY_ATTENTION, case, {"batch": 1, "head": 2})
    bad = sharding.run_sharded(pk.TOY_ATTENTION, case, {"batch": 1, "head": 2},
                               impl=pk.head_count_baked_in)
    print("GOOD", good.passed, good.detail)
    print("BAD", bad.passed, bad.detail)
    # A bias shared by all heads: its gradient is summed over the head shards.
    from kernel_harness.records.registry import get_family
    from kernel_harness.families.sdpa.cases import SdpaCase
    sdpa = SdpaCase(dtype="float32", seed=1, batch=2, q_len=64, kv_len=64, q_heads=4,
                    kv_heads=2, head_dim=32, bias="head-shared", is_causal=True)
    shared = sharding.run_sharded(get_family("sdpa"), sdpa, {"batch": 2, "head": 2})
    print("SHARED", shared.passed, shared.detail)
""")


def test_planted_head_count_bug_fails_only_sharded():
    from kernel_harness.core.backends import resolve_backend
    from kernel_harness.run.runner import check_case
    from tests.helpers import planted_kernels as pk

    case = pk.ToyAttentionCase(dtype="float32", seed=3, heads=2, causal=True)
    assert check_case(pk.TOY_ATTENTION, case, resolve_backend("interpret"),
                      pk.head_count_baked_in).passed  # unsharded it is right
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "GOOD True all outputs within tolerance" in proc.stdout
    assert "BAD False out: max rel err" in proc.stdout
    assert "SHARED True" in proc.stdout


# Nightly: the pristine kernels; the sharded planted bug runs per push.
@pytest.mark.nightly
def test_registered_families_pass_sharded():
    code, output = sharding.run_in_subprocess(["splash", "hstu", "sdpa", "flash"], examples=1,
                                              timeout=900)
    assert code == 0, output[-3000:]
    assert output.count("PASS mesh") == 3, output
    assert "flash      SKIP" in output  # TPU interpret mode only: see flash/metamorphic.py


def test_mesh_shapes():
    sizes = {"batch": 2, "head": 6, "kv_head": 2, "query": 1, "key": 1}
    assert sharding.mesh_shapes(sizes)[0] == {"batch": 2, "head": 2}
    assert sharding.mesh_shapes({"batch": 1, "head": 1, "kv_head": 1}) == []
