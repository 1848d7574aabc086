"""gpu-norm and gpu-softmax references against hand-computed values and against jax.vjp
of a plain jnp forward; the cases' validity checks and what the strategies reach."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from kernel_harness import get_family
from kernel_harness.ops.norm.cases import NormCase, norm_cases
from kernel_harness.ops.norm.reference import norm
from kernel_harness.ops.softmax.cases import SoftmaxCase, softmax_cases
from kernel_harness.ops.softmax.reference import reference as softmax_reference
from kernel_harness.ops.softmax.reference import softmax


def test_layer_norm_by_hand():
    # x = [1, 2, 3]: mean 2, var 2/3, eps 1/3 -> rstd 1, xhat = [-1, 0, 1].
    x = np.array([[[1.0, 2.0, 3.0]]])
    w, b = np.array([2.0, 3.0, 4.0]), np.array([0.5, 0.0, -0.5])
    do = np.array([[[1.0, 0.0, 0.0]]])
    r = norm("layer_norm", x, w, b, do, eps=1 / 3)
    np.testing.assert_allclose(r["out"], [[[-1.5, 0.0, 3.5]]])
    # g = do * w = [2, 0, 0]; mean g = 2/3; mean(g * xhat) = -2/3.
    # dx = g - 2/3 - xhat * (-2/3) = [2 - 2/3 - 2/3, -2/3, -2/3 + 2/3]
    np.testing.assert_allclose(r["dx"], [[[2 / 3, -2 / 3, 0.0]]], atol=1e-15)
    np.testing.assert_allclose(r["dweight"], [-1.0, 0.0, 0.0])
    np.testing.assert_allclose(r["dbias"], [1.0, 0.0, 0.0])


def test_rms_norm_by_hand():
    # x = [3, 4]: mean(x^2) = 12.5, eps 3.5 -> rstd 1/4, xhat = [0.75, 1].
    x = np.array([[[3.0, 4.0]]])
    w, b = np.array([1.0, 2.0]), np.array([1.0, 1.0])
    do = np.array([[[0.0, 1.0]]])
    r = norm("rms_norm", x, w, b, do, eps=3.5)
    np.testing.assert_allclose(r["out"], [[[1.75, 3.0]]])
    # g = [0, 2]; mean(g * xhat) = 1; dx = (g - xhat) / 4 = [-0.1875, 0.25]
    np.testing.assert_allclose(r["dx"], [[[-0.1875, 0.25]]])
    np.testing.assert_allclose(r["dweight"], [0.0, 1.0])
    np.testing.assert_allclose(r["dbias"], [0.0, 1.0])


def _jnp_norm(op, x, w, b, eps):
    c = x - x.mean(-1, keepdims=True) if op == "layer_norm" else x
    return c * jax.lax.rsqrt((c * c).mean(-1, keepdims=True) + eps) * w + b


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_gradient_formulas_match_jax_vjp(op):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 37)) + 0.5
    w, b, do = rng.standard_normal(37), rng.standard_normal(37), rng.standard_normal(x.shape)
    r = norm(op, x, w, b, do, eps=1e-2)
    f32 = [jnp.asarray(a, jnp.float32) for a in (x, w, b, do)]
    out, vjp = jax.vjp(lambda x, w, b: _jnp_norm(op, x, w, b, 1e-2), *f32[:3])
    dx, dw, db = vjp(f32[3])
    for name, got in (("out", out), ("dx", dx), ("dweight", dw), ("dbias", db)):
        np.testing.assert_allclose(r[name], got, rtol=2e-4, atol=2e-5, err_msg=name)
    assert np.all(r["dx:magnitude"] >= np.abs(r["dx"]) * (1 - 1e-12))


def test_reference_is_two_pass_where_a_one_pass_variance_cancels():
    """Rows 1e4 spreads from 0: the float64 two-pass reference keeps xhat at unit
    variance (a float32 one-pass variance would be off by ~100%)."""
    rng = np.random.default_rng(1)
    x = (1e4 + rng.standard_normal((1, 1, 256))).astype(np.float32)
    r = norm("layer_norm", x, np.ones(256), np.zeros(256), np.zeros_like(x), eps=1e-6)
    assert abs(np.var(r["out"]) - 1) < 1e-3


def test_softmax_by_hand():
    p = softmax(np.array([0.0, np.log(3.0)]))
    np.testing.assert_allclose(p, [0.25, 0.75])
    # large logits do not overflow
    np.testing.assert_allclose(softmax(np.array([1000.0, 1000.0])), [0.5, 0.5])
    case = SoftmaxCase(dtype="float32", seed=0, leading=(2, 1), n=3)
    x = np.log(np.array([[[1.0, 1.0, 2.0]], [[1.0, 2.0, 5.0]]]))
    np.testing.assert_allclose(softmax_reference(case, {"x": x})["out"],
                               [[0.25, 0.25, 0.5], [0.125, 0.25, 0.625]], rtol=1e-6)


@pytest.mark.parametrize("kwargs, match", [
    (dict(op="group_norm"), "op must be"),
    (dict(leading=(2,)), "two positive sizes"),
    (dict(n=0), "n must be"),
    (dict(eps=0.0), "eps must be"),
])
def test_bad_norm_cases_are_refused(kwargs, match):
    base = dict(dtype="float32", seed=0, op="layer_norm", leading=(1, 1), n=4)
    with pytest.raises(ValueError, match=match):
        NormCase(**{**base, **kwargs})


def test_float16_softmax_logits_that_overflow_are_refused():
    with pytest.raises(ValueError, match="overflow"):
        SoftmaxCase(dtype="float16", seed=0, leading=(), n=4, scale=2e4)


def test_strategies_reach_the_hard_paths():
    fam = get_family("gpu-norm")
    seen: set[str] = set()

    @settings(max_examples=300, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(norm_cases())
    def draw(case):
        case.materialize()
        seen.update(fam.events(case))

    draw()
    for ev in ("partial-col-block", "multi-col-block", "partial-dw-row-block",
               "multi-dw-row-block", "offset>=100-spreads", "eps-dominates-var",
               "bfloat16", "float16", "rms_norm", "one-row", "large-magnitude"):
        assert ev in seen, ev

    sm = get_family("gpu-softmax")
    seen.clear()

    @settings(max_examples=200, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(softmax_cases())
    def draw_sm(case):
        case.materialize()
        seen.update(sm.events(case))

    draw_sm()
    for ev in ("partial-block", "pow2-n", "n=1", "rank-1", "rank-4", "rank-6", "large-offset",
               "large-logits", "float16"):
        assert ev in seen, ev


def test_every_output_is_compared():
    """gpu-norm judges out (inference call), out_vjp, dx, dweight, dbias; gpu-softmax
    only out: it has no weight, bias or backward kernel, so nothing is reported for them."""
    fam = get_family("gpu-norm")
    assert set(fam.output_axes) == {"out", "dx", "dweight", "dbias"}
    assert dict(fam.same_as) == {"out_vjp": "out"}
    assert set(get_family("gpu-softmax").output_axes) == {"out"}
