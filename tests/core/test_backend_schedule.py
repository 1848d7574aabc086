"""A backend's pinned TPU interpreter schedule (``Backend.scheduled``) reaches the kernel on
both ways a family runs one (an ``interpret=`` argument, or forced interpret mode), wins
over the case's own, and exists on the TPU interpreter only. The interpreter reports every
grid point it runs (``grid_point_recorder``): the order of a ``parallel`` grid is the proof."""

from __future__ import annotations

import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from kernel_harness.core.backends import BackendUnavailable, resolve_backend

TPU_INTERPRET = resolve_backend("tpu-interpret")
GRID = 8


def _doubled(x, interpret=False):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    return pl.pallas_call(
        kernel, grid=(GRID,), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
        interpret=interpret)(x)


def _order(via: str, *, seed: int, case_seed: int | None = None) -> dict[int, list[int]]:
    """Grid coordinates each simulated core ran, in order, under a pinned grid seed."""
    visits = collections.defaultdict(list)

    def record(token, coords, core):  # the interpreter threads a token through
        visits[int(core)].append(int(np.asarray(coords)[0]))
        return token

    backend = TPU_INTERPRET.scheduled(random_seed=seed, grid_point_recorder=record)
    x = jnp.arange(GRID * 8 * 128, dtype=jnp.float32).reshape(GRID * 8, 128)
    if via == "argument":
        out = _doubled(x, interpret=backend.pallas_interpret())
    else:
        with backend.forcing_interpret(**({} if case_seed is None else
                                          {"random_seed": case_seed})):
            out = _doubled(x)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x) * 2)
    assert sorted(c for cs in visits.values() for c in cs) == list(range(GRID))
    return dict(visits)


@pytest.mark.parametrize("via", ["argument", "forced"])
def test_the_grid_seed_reaches_the_kernel_and_is_reproducible(via):
    orders = {seed: _order(via, seed=seed) for seed in (1, 2, 3)}
    assert _order(via, seed=2) == orders[2]  # the same seed, the same order
    assert len({repr(o) for o in orders.values()}) > 1, orders  # another seed, another order


def test_the_backends_schedule_wins_over_the_cases():
    assert _order("forced", seed=1, case_seed=2) == _order("forced", seed=1)


def test_scheduled_merges_and_is_hashable():
    backend = TPU_INTERPRET.scheduled(random_seed=4).scheduled(dma_execution_mode="eager")
    assert backend.schedule == (("dma_execution_mode", "eager"), ("random_seed", 4))
    assert hash(backend) != hash(TPU_INTERPRET)  # programs cached per backend see it
    assert TPU_INTERPRET.schedule == ()


def test_only_the_tpu_interpreter_has_a_schedule():
    with pytest.raises(BackendUnavailable, match="use --backend tpu-interpret"):
        resolve_backend("interpret").scheduled(random_seed=1)
