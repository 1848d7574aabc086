"""Planted bugs: wrappers around the real Pallas GPU norm / softmax kernels (or plain jnp
stand-ins with one thing wrong) that the family checks must catch.

Each test runs the family's real matches-reference property (a few derandomized examples,
no shrinking) with the buggy implementation on the interpret backend and asserts it
fails on the output the bug touches. Strategies are narrowed only so every example can
reach the bug.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import pytest
from hypothesis import HealthCheck, Phase, settings

from kernel_harness import get_family, resolve_backend
from kernel_harness.checks.properties import HarnessFailure, matches_reference
from kernel_harness.families.gpu_norm import kernel
from kernel_harness.families.gpu_softmax import kernel as sm_kernel
from kernel_harness.ops.norm.cases import norm_cases
from kernel_harness.ops.softmax.cases import softmax_cases

BACKEND = resolve_backend("interpret")


def norm_x_in_bf16(op, x, weight, bias, **kw):
    """A float32 norm that secretly rounds x to bfloat16 first."""
    return kernel.norm(op, x.astype(jnp.bfloat16).astype(x.dtype), weight, bias, **kw)


def norm_dweight_doubled(op, x, weight, bias, **kw):
    """Right forward, dx and dbias; dweight twice what it should be."""
    w = weight * 2.0 + jax.lax.stop_gradient(weight - weight * 2.0)
    return kernel.norm(op, x, w, bias, **kw) - jax.lax.stop_gradient(
        kernel.norm(op, x, w, bias, **kw) - kernel.norm(op, x, weight, bias, **kw))


def norm_drops_bias_gradient(op, x, weight, bias, **kw):
    """The bias enters the forward, but no gradient flows to it."""
    return kernel.norm(op, x, weight, jax.lax.stop_gradient(bias), **kw)


def one_pass_layer_norm(op, x, weight, bias, *, eps, interpret):
    """A plain jnp layer_norm with the variance as E[x^2] - mean^2 (in x's dtype)."""
    mean = x.mean(-1, keepdims=True)
    var = (x * x).mean(-1, keepdims=True) - mean * mean
    return (x - mean) * jax.lax.rsqrt(var + eps) * weight + bias


def softmax_without_max(x, *, axis=-1, interpret=False):
    """softmax as exp(x) / sum(exp(x)) in float32."""
    e = jnp.exp(x.astype(jnp.float32))
    return (e / e.sum(axis, keepdims=True)).astype(x.dtype)


def softmax_bf16_store(x, *, axis=-1, interpret=False):
    """The real kernel, its float32 result rounded to bfloat16."""
    return sm_kernel.softmax(x, axis=axis, interpret=interpret).astype(
        jnp.bfloat16).astype(x.dtype)


def _fails(family_name, impl, strategy, max_examples=5):
    family = dataclasses.replace(get_family(family_name), cases=lambda: strategy,
                                 seed_cases=lambda without: ())
    prop = settings(max_examples=max_examples, deadline=None, database=None, derandomize=True,
                    phases=(Phase.generate,), suppress_health_check=list(HealthCheck))(
        matches_reference(family, backend=BACKEND, impl=impl))
    with pytest.raises(HarnessFailure) as info:
        prop()
    return {v.stats.output for v in info.value.result.failures}


F32 = ("float32",)


def test_float32_norm_rounding_x_to_bf16_fails():
    assert "out" in _fails("gpu-norm", norm_x_in_bf16, norm_cases(dtypes=F32).filter(
        lambda c: c.n > 1))


def test_doubled_dweight_fails_on_dweight_only():
    assert _fails("gpu-norm", norm_dweight_doubled, norm_cases(dtypes=F32)) == {"dweight"}


def test_missing_bias_gradient_fails_on_dbias_only():
    assert _fails("gpu-norm", norm_drops_bias_gradient, norm_cases(dtypes=F32)) == {"dbias"}


def test_one_pass_variance_fails_on_rows_far_from_zero():
    failed = _fails("gpu-norm", one_pass_layer_norm, norm_cases(
        dtypes=F32, ops=("layer_norm",)).filter(
            # where the variance, not eps, sets the scale: there the cancellation shows
            lambda c: c.offset >= 300 and c.n > 1 and c.spread**2 > 10 * c.eps))
    assert "out" in failed


def test_softmax_without_max_subtraction_fails_on_large_logits():
    failed = _fails("gpu-softmax", softmax_without_max,
                    softmax_cases().filter(lambda c: c.offset >= 300 or c.scale >= 1e3))
    assert failed == {"out"}


def test_float32_softmax_stored_in_bf16_fails():
    assert _fails("gpu-softmax", softmax_bf16_store, softmax_cases(dtypes=F32).filter(
        lambda c: c.n > 1)) == {"out"}
