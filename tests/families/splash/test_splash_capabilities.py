"""splash's ``split-bwd`` optional feature (issue 25): an adapter that only has the fused
backward must never get split-backward cases, neither drawn, nor seeded, nor as a block
variant; narrowed, such an implementation passes; unnarrowed it is handed split cases."""

from __future__ import annotations

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from kernel_harness import check_case, get_family, resolve_backend
from kernel_harness.families.splash import kernel as splash_kernel
from kernel_harness.records.narrow import narrow

SPLASH = get_family("splash")
FUSED = narrow(SPLASH, {"split-bwd"})
FIXED = settings(database=None, derandomize=True, max_examples=30, deadline=None)


def fused_only(mask, *, block_sizes, **kwargs):
    """make_splash_mha for a library that has only the fused backward."""
    if not block_sizes.use_fused_bwd_kernel:
        raise NotImplementedError("this splash has no split (dq kernel) backward")
    return splash_kernel.make_splash_mha(mask, block_sizes=block_sizes, **kwargs)


def test_listed_for_describe():
    assert "split-bwd" in SPLASH.optional


def test_narrowed_strategy_seeds_and_block_variants_are_fused_only():
    drawn = []

    @FIXED
    @given(FUSED.cases(), st.data())
    def collect(case, data):
        drawn.append(case)
        variant = data.draw(FUSED.metamorphic.block_variants(case))
        assert variant.fused_bwd and variant.block_q_dq is None

    collect()
    assert drawn and all(c.fused_bwd for c in drawn)
    assert all(c.fused_bwd for c in FUSED.seed_cases(FUSED.without))
    # the control: unnarrowed, split backward cases are drawn and seeded
    find(SPLASH.cases(), lambda c: not c.fused_bwd, settings=FIXED)
    assert not all(c.fused_bwd for c in SPLASH.seed_cases(SPLASH.without))


# Nightly: sdpa's narrowed implementation takes the same path per push.
@pytest.mark.nightly
def test_fused_only_impl_passes_narrowed_and_refuses_unnarrowed_split_cases():
    backend = resolve_backend("interpret")
    small = find(FUSED.cases(seq_lens=(128,)), lambda c: True, settings=FIXED)
    assert check_case(FUSED, small, backend, fused_only).passed
    split = find(SPLASH.cases(seq_lens=(128,)), lambda c: not c.fused_bwd, settings=FIXED)
    with pytest.raises(NotImplementedError, match="no split"):
        check_case(SPLASH, split, backend, fused_only)
