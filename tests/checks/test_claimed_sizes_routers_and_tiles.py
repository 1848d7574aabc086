"""Claimed sizes the ladder of each family did not reach (adversarial round 3): gpu-softmax
claims an MoE router's softmax (tens of thousands of rows of 8-256 logits), where rows, not
the row length, grow; megablox-gmm traces its bfloat16 layer with the tiling its users
pass ((512, 1024, 1024)), not only the kernel's default. An implementation running XLA
only there fails ``claimed-sizes`` as a ghost branch; the kernels pass."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kernel_harness import testing
from kernel_harness.families.megablox_gmm import kernel as gmm_kernel
from kernel_harness.records.registry import get_family
from kernel_harness.testing import HarnessCheckFailed
from tests.helpers.generic_cheats import gmm, softmax


def _router_ghost_softmax(x, *, axis=-1, interpret=False):
    """The kernel, but XLA's softmax for 1024 rows or more of at most 256 logits."""
    if int(np.prod(x.shape[:-1])) >= 1024 and x.shape[-1] <= 256:
        return jax.nn.softmax(x, axis=axis)
    return softmax(x, axis=axis, interpret=interpret)


def _big_tile_ghost_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                        existing_out, transpose_rhs, interpret):
    """megablox's gmm, but XLA's ragged_dot for a tm of 512 or more."""
    if tiling[0] >= 512:
        return jax.lax.ragged_dot(lhs, rhs, group_sizes,
                                  preferred_element_type=preferred_element_type)
    return gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
               existing_out, transpose_rhs, interpret)


def test_gpu_softmax_claims_many_short_rows():
    sizes = [a["x"].shape for a in get_family("gpu-softmax").claimed.sizes()]
    assert any(int(np.prod(s[:-1])) >= 16384 and s[-1] <= 8 for s in sizes), sizes
    assert any(int(np.prod(s[:-1])) >= 16384 and s[-1] == 256 for s in sizes), sizes


def test_megablox_traces_the_production_tiling_and_a_rung_keeps_tm_dividing_m():
    tilings = [gmm_kernel._tiling(a) for a in get_family("megablox-gmm").claimed.sizes()]
    assert (512, 1024, 1024) in tilings and (128, 128, 128) in tilings
    rung = {"lhs": jax.ShapeDtypeStruct((768, 512), jnp.bfloat16)}
    assert gmm_kernel._tiling(rung) == (256, 1024, 1024)


@pytest.mark.parametrize("family, ghost, where", [
    ("gpu-softmax", _router_ghost_softmax, "float32 x=\\(16384, 8\\)"),
    ("megablox-gmm", _big_tile_ghost_gmm, "bfloat16,float32,int32 lhs=\\(32768, 4096\\)"),
], ids=["router", "production-tiles"])
def test_a_ghost_branch_there_fails_and_the_kernel_passes(family, ghost, where):
    testing.check(family, profile="ci", properties=["claimed-sizes"])
    with pytest.raises(HarnessCheckFailed, match=f"FAIL {family} ghost branch {where}"):
        testing.check(family, impl=ghost, profile="ci", properties=["claimed-sizes"])
