"""ops.attention.sdpa: the scaled-dot-product-attention call both SDPA families share."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from kernel_harness.core.case import Case
from kernel_harness.ops.attention.sdpa import SdpaCall
from kernel_harness.ops.attention.vocabulary import Shape

GOOD = dict(dtype="float32", seed=0, batch=2, q_heads=4, kv_heads=2, q_len=8, kv_len=16,
            head_dim=64)


def test_default_scale_and_query_spread() -> None:
    case = SdpaCall(**GOOD, logit_scale=4.0)
    assert case.effective_scale == pytest.approx(1 / 8)
    # scale * q.k over head_dim standard-normal products: std logit_scale.
    assert case.q_scale * math.sqrt(case.head_dim) * case.effective_scale == pytest.approx(4.0)
    explicit = SdpaCall(**GOOD, scale=0.5)
    assert explicit.effective_scale == 0.5 and explicit.q_scale == pytest.approx(1 / 4)
    assert case.sharing == "gqa" and case.group == 2


@pytest.mark.parametrize(("over", "message"), [
    (dict(kv_heads=3), "multiple of kv_heads"),
    (dict(q_heads=0), "q_heads"),
    (dict(q_len=0), "q_len"),
    (dict(mask_keep=0.0), "mask_keep"),
    (dict(scale=float("inf")), "scale must be positive and finite"),
    (dict(logit_scale=-1.0), "logit_scale"),
])
def test_bad_calls_say_what_is_wrong(over: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SdpaCall(**{**GOOD, **over})


@pytest.mark.parametrize("bases", [(Shape, Case), (Case, Shape)], ids=["shape-first", "case-first"])
def test_a_shape_case_checks_heads_and_dtype_in_either_base_order(bases: tuple) -> None:
    kind = dataclasses.dataclass(frozen=True, kw_only=True)(type("Kind", bases, {}))
    sizes = dict(batch=1, q_heads=4, kv_heads=2, q_len=2, kv_len=2, head_dim=8)
    assert kind(dtype="float32", seed=0, **sizes).group == 2
    with pytest.raises(ValueError, match="multiple of kv_heads"):
        kind(dtype="float32", seed=0, **{**sizes, "kv_heads": 3})
    with pytest.raises(ValueError, match="dtype"):
        kind(dtype="int8", seed=0, **sizes)


@pytest.mark.parametrize(("layout", "q", "kv"), [("bqhd", (2, 8, 4, 64), (2, 16, 2, 64)),
                                                 ("bhqd", (2, 4, 8, 64), (2, 2, 16, 64))])
def test_query_key_value_come_in_the_layout_asked(layout: str, q: tuple, kv: tuple) -> None:
    case = SdpaCall(**GOOD)
    got = case.draw_qkv(np.random.default_rng(0), layout)
    assert got["query"].shape == q == case.query_shape(layout)
    assert got["key"].shape == got["value"].shape == kv
    assert {a.dtype for a in got.values()} == {np.dtype("float32")}


def test_an_unknown_layout_is_an_error() -> None:
    with pytest.raises(ValueError, match="layout must be one of"):
        SdpaCall(**GOOD).draw_qkv(np.random.default_rng(0), "bshd")
