"""`--impl` factories of other libraries get the case's mask without jax's mask classes."""

import dataclasses

import numpy as np
from hypothesis import find, settings
from jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_kernel import (
    make_splash_mha,
)

from kernel_harness.core.backends import resolve_backend
from kernel_harness.families.splash import kernel as splash_kernel
from kernel_harness.ops.attention.masks import parse_mask
from kernel_harness.records.registry import get_family

SPLASH = get_family("splash")


def _case():
    case = find(SPLASH.cases(), lambda c: c.q_heads == 1 and c.q_segments is None
                and not c.sinks and c.soft_cap is None, settings=settings(database=None))
    return dataclasses.replace(case, masks=("local(left=3, right=0, offset=0)",))


def test_description_is_dense_per_head_and_parsed():
    case = _case()
    desc = splash_kernel.mask_description(case)
    assert desc.specs == case.head_masks() and desc.parsed[0] == parse_mask(desc.specs[0])
    t = np.arange(case.q_len)[:, None]
    s = np.arange(case.kv_len)[None, :]
    expected = (s <= t) & (s >= t - 3)  # built here by hand, not by the harness
    assert desc.dense.shape == (1, case.q_len, case.kv_len)
    np.testing.assert_array_equal(desc.dense[0], expected)


def test_factory_asking_for_it_gets_it_and_others_do_not():
    seen = []

    def factory(mask, *, mask_description=None, **kwargs):
        seen.append(mask_description)
        return make_splash_mha(mask, **kwargs)

    assert splash_kernel.takes_mask_description(factory)
    assert not splash_kernel.takes_mask_description(make_splash_mha)
    case = _case()
    result = SPLASH.run(factory, case, case.materialize(), resolve_backend("interpret"))
    assert "out" in result and seen and seen[0] is not None
    assert seen[0].dense.shape == (1, case.q_len, case.kv_len)
