"""The wrapper comparison with kernels stood in for (round 9 of the adversarial set:
wrappers of layout alone that differ from the family's only past a size): a ghost branch
at a claimed size, named; an honest wrapper under another name passes; one that differs
everywhere is not compared."""

from __future__ import annotations

import pytest

from tests.helpers import wrapper_cheats
from tests.helpers.claimed import softmax_claimed_sizes


@pytest.mark.triton_ops  # gpu-softmax's kernel: jax <= 0.12.0.1
@pytest.mark.parametrize(("impl", "found"), [
    (wrapper_cheats.tail_masked, "kernel 1 is handed other inputs"),
    (wrapper_cheats.rows_interleaved, "from the same kernel results it returns another "
                                      "output 1"),
])
def test_a_wrapper_that_differs_past_a_size_is_a_ghost_branch(impl, found):
    from kernel_harness.checks.claimed_sizes import GhostBranch

    with pytest.raises(GhostBranch) as failure:
        softmax_claimed_sizes(impl)()
    assert "ghost branch" in str(failure.value) and found in str(failure.value)
    assert "with every kernel stood in for" in str(failure.value)


@pytest.mark.triton_ops
@pytest.mark.parametrize("impl", [wrapper_cheats.same, wrapper_cheats.padded])
def test_the_same_wrapper_and_one_that_differs_everywhere_pass(impl):
    softmax_claimed_sizes(impl)()


def test_the_stand_in_records_what_it_is_handed_by_position():
    import jax.numpy as jnp
    import numpy as np

    from kernel_harness.checks.wrapper_standin import StandIn

    log: list = []
    run = StandIn(log)
    aval = np.zeros((4, 8), np.float32)
    x = jnp.arange(32.0).reshape(4, 8)
    a = run([x], [aval])[0]
    run([x], [aval])
    run([x[::-1]], [aval])  # the same values, other places
    run([x.at[3, 7].set(-jnp.inf)], [aval])
    sigs = [int(s[0]) for s in log]
    assert sigs[0] == sigs[1] and len(set(sigs[1:])) == 3
    assert len(np.unique(np.asarray(a))) == a.size  # a pattern distinct by position
    assert run.nested.log is None  # a loop body's stand-in records nothing
