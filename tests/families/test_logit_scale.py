"""The drawn logit scale (issue 11): every softmax family draws it, it is a case field
(old case JSON without it still loads, as 1x), and it scales exactly the logits (q)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, settings

from kernel_harness.core.case import LOGIT_SCALES, check_logit_scale
from kernel_harness.records import registry
from tests.helpers.per_push import per_push

SOFTMAX_FAMILIES = ("splash", "flash", "sdpa", "gpu-mha", "gpu-decode", "gpu-paged")
_Q = {"sdpa": "query"}
#: Whether the strategy draws such a case at all: the first one found, not shrunk (the tests
#: using it read nothing of the case but what was searched for; shrinking cost seconds).
EXISTS = settings(database=None, max_examples=500, suppress_health_check=list(HealthCheck),
                  phases=[Phase.generate])


@pytest.mark.parametrize("name", per_push(SOFTMAX_FAMILIES))
def test_strategy_draws_large_logits_and_q_carries_them(name):
    fam = registry.get_family(name)
    case = find(fam.cases(), lambda c: c.logit_scale == LOGIT_SCALES[-1],
                settings=settings(database=None, max_examples=300,
                                  suppress_health_check=list(HealthCheck)))
    q_key = _Q.get(name, "q")
    base = dataclasses.replace(case, logit_scale=1.0)
    big, small = case.materialize()[q_key], base.materialize()[q_key]
    # A power-of-two factor commutes with rounding to the case dtype: exactly 16x.
    np.testing.assert_array_equal(np.asarray(big, np.float64),
                                  np.asarray(small, np.float64) * LOGIT_SCALES[-1])
    # Nothing else changes, and the scale is data (the same compiled program).
    others = {k: v for k, v in case.materialize().items() if k != q_key}
    for k, v in base.materialize().items():
        if k != q_key:
            np.testing.assert_array_equal(others[k], v)
    assert case.static_key() == base.static_key()
    assert f"logits-{LOGIT_SCALES[-1]:g}x" in list(fam.events(case))


@pytest.mark.parametrize("name", per_push(SOFTMAX_FAMILIES))
def test_old_case_json_loads_as_1x(name):
    fam = registry.get_family(name)
    case = find(fam.cases(), lambda c: True, settings=EXISTS)
    data = json.loads(case.to_json())
    data.pop("logit_scale")
    old = type(case).from_json(json.dumps(data))
    assert old.logit_scale == 1.0
    assert type(case).from_json(case.to_json()) == case


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), float("nan"), "4"])
def test_bad_logit_scale_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="logit_scale must be a positive finite number"):
        check_logit_scale(bad)


def test_low_precision_draws_large_logits_only_where_the_calibrated_bound_judges():
    # Pristine bfloat16 flash dk / sdpa dq exceed the fixed tables (measured at O(1)
    # logits) at 4x/16x; families judging bfloat16 by the calibrated bound (README
    # "Calibrated bounds") draw them there, the others keep 1x in low precision.
    from kernel_harness.core.case import logit_scales_for

    assert logit_scales_for("float32") == LOGIT_SCALES
    assert logit_scales_for("bfloat16") == logit_scales_for("float16") == (1.0,)
    assert logit_scales_for("bfloat16", calibrated=True) == LOGIT_SCALES


@pytest.mark.parametrize("name", ["sdpa", "flash", "splash"])
def test_calibrated_families_draw_large_bfloat16_logits(name):
    fam = registry.get_family(name)
    assert fam.calibrated_dtypes() == {"bfloat16"}
    case = find(fam.cases(), lambda c: c.dtype == "bfloat16" and c.logit_scale == 16.0,
                settings=EXISTS)
    assert case.logit_scale == 16.0


# Nightly: a fact of splash's strategy; the logit-scale draws run per push on splash.
@pytest.mark.nightly
def test_splash_bfloat16_cases_with_sinks_keep_1x_logits():
    # dsinks keeps a fixed bound that large bf16 logits exceed on the pristine kernel
    # (README "The judge"): such cases are never drawn, while f32 with sinks is.
    from hypothesis.errors import NoSuchExample

    fam = registry.get_family("splash")
    with pytest.raises(NoSuchExample):
        find(fam.cases(), lambda c: c.dtype == "bfloat16" and c.sinks and c.logit_scale > 1,
             settings=settings(database=None, max_examples=300,
                               suppress_health_check=list(HealthCheck)))
    case = find(fam.cases(), lambda c: c.dtype == "float32" and c.sinks and c.logit_scale > 1,
                settings=EXISTS)
    assert case.sinks
