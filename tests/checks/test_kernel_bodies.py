"""Kernel bodies compared across sizes with the family's (round 11 of the adversarial set:
a gain, a mask bound or a cast chosen from the shape inside the kernel, past the sizes
any check runs): a ghost branch, named; a kernel of its own that changes as the family's
does, or not at all, passes."""

from __future__ import annotations

import pytest

from kernel_harness.core.compat.pallas_bodies import KernelDigest
from tests.helpers import kernel_body_cheats as cheats
from tests.helpers.claimed import softmax_claimed_sizes


@pytest.mark.triton_ops  # gpu-softmax's kernel: jax <= 0.12.0.1
@pytest.mark.parametrize(("impl", "found"), [
    (cheats.gain_past_rows, "body holds the constant 0.75 here"),
    (cheats.last_logit_dropped, "body bounds a position by 31999 here"),
    (cheats.bf16_exp_past_rows, "(bfloat16) here and not at the small size"),
    (cheats.renormalized_below_rows, "it no longer computes div, reduce_sum there"),
    (cheats.epilogue_row_limit, "with every kernel stood in for (wrapper_standin), from the "
                                "same kernel results it returns another output 1"),
])
def test_a_kernel_body_that_changes_past_a_size_is_a_ghost_branch(impl, found):
    from kernel_harness.checks.claimed_sizes import GhostBranch

    with pytest.raises(GhostBranch) as failure:
        softmax_claimed_sizes(impl)()
    assert "ghost branch" in str(failure.value) and found in str(failure.value)


@pytest.mark.triton_ops
@pytest.mark.parametrize("impl", [cheats.base_two, cheats.wider_block_past_rows])
def test_a_kernel_of_its_own_that_changes_as_the_familys_passes(impl):
    softmax_claimed_sizes(impl)()


def _digest(ops=(), floats=(), bounds=(), extents=()):
    return KernelDigest(frozenset(ops), frozenset(floats), frozenset(bounds),
                        frozenset(extents))


def test_a_constant_scaled_as_the_familys_is_explained():
    from kernel_harness.checks.kernel_bodies import difference

    # The family's scale goes from 1/sqrt(64) to 1/sqrt(128); the implementation folds
    # log2(e) into its own: it scales the same way.
    family = ([_digest(floats={0.125})], [_digest(floats={0.125 / 2 ** 0.5})])
    mine_small = [_digest(floats={0.125 * 1.4426950408889634})]
    honest = [_digest(floats={0.125 / 2 ** 0.5 * 1.4426950408889634})]
    scaled_more = [_digest(floats={0.125 / 2 ** 0.5 * 1.25})]
    assert difference(mine_small, honest, *family) is None
    assert "constant" in difference(mine_small, scaled_more, *family)
    # The family divides by the row length; the implementation multiplies by 1/n.
    family = ([_digest(floats={100.0})], [_digest(floats={8192.0})])
    assert difference([_digest(floats={0.01})], [_digest(floats={1 / 8192})],
                      *family) is None


def test_ops_lost_and_bounds_are_judged_against_the_familys():
    from kernel_harness.checks.kernel_bodies import difference

    family = ([_digest(ops={("lt", "bool")}, bounds={("lt", 100)}, extents={100, 128})],
              [_digest(ops={("lt", "bool")}, bounds={("lt", 4000)}, extents={4000, 4096})])
    masked = [_digest(ops={("lt", "bool"), ("select_n", "float32")}, bounds={("lt", 100)},
                      extents={100, 128})]
    unmasked = [_digest(ops={("lt", "bool")}, bounds={("lt", 4000)}, extents={4000, 4096})]
    assert "no longer computes select_n" in difference(masked, unmasked, *family)
    assert difference(masked, masked, *family) is None  # a bound that is an extent
    shifted = [_digest(ops=masked[0].ops, bounds={("lt", 3999)}, extents={4000, 4096})]
    assert "bounds a position by 3999 here (lt)" in difference(masked, shifted, *family)
    last = [_digest(ops=masked[0].ops, bounds={("eq", 4095)}, extents={4000, 4096})]
    assert difference(masked, last, *family) is None  # the last index
    gated = [_digest(ops=masked[0].ops, bounds={("ge", 8192)}, extents={4000, 4096})]
    assert "bounds a position by 8192" in difference(gated, gated, *family)  # every size
    assert difference(masked, [_digest(ops=masked[0].ops, bounds={("lt", 4000)},
                                       extents={4000, 4096})], *family) is None
