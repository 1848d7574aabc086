"""gpu-norm's op relations pass on the kernels and fail on a planted bug each."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from kernel_harness.checks.metamorphic import MetamorphicFailure
from kernel_harness.families.gpu_norm import kernel
from kernel_harness.ops.norm.cases import norm_cases
from tests.helpers.relation_runs import run_relation

F32 = norm_cases(dtypes=("float32",))
LAYER = norm_cases(dtypes=("float32",), ops=("layer_norm",))


def rows_coupled(op, x, weight, bias, **kw):
    """Planted: the output reads the mean over all rows (a reduction over the wrong axes)."""
    return kernel.norm(op, x, weight, bias, **kw) + 1e-3 * jnp.tanh(x.mean())


def eps_outside_sqrt(op, x, weight, bias, *, eps, interpret):
    """Planted: rstd = 1 / (sqrt(var) + eps), eps added outside the square root."""
    xf = x.astype(jnp.float32)
    c = xf - xf.mean(-1, keepdims=True) if op == "layer_norm" else xf
    rstd = 1.0 / (jnp.sqrt((c * c).mean(-1, keepdims=True)) + eps)
    return (c * rstd * weight + bias).astype(x.dtype)


def no_mean_subtraction(op, x, weight, bias, *, eps, interpret):
    """Planted: layer_norm normalizes x by its standard deviation without centring it."""
    xf = x.astype(jnp.float32)
    c = xf - xf.mean(-1, keepdims=True)
    rstd = 1.0 / jnp.sqrt((c * c).mean(-1, keepdims=True) + eps)
    return (xf * rstd * weight + bias).astype(x.dtype)


@pytest.mark.nightly  # the pristine kernel on drawn cases: docs/ci.md
@pytest.mark.parametrize("name,strategy", [("rows-independent", F32),
                                           ("scale-equivariant", F32),
                                           ("shift-invariant", LAYER)])
def test_relation_passes_on_the_kernel(name, strategy):
    observer = run_relation("gpu-norm", name, strategy, max_examples=2)
    assert observer.examples >= 1 and observer.failed == 0


def test_rows_independent_catches_rows_that_read_each_other():
    strategy = F32.filter(lambda c: c.rows > 1)
    with pytest.raises(MetamorphicFailure, match="bitwise"):
        run_relation("gpu-norm", "rows-independent", strategy, impl=rows_coupled)


def test_scale_equivariant_catches_eps_outside_the_sqrt():
    # eps matters against the variance: spread 1e-2, eps >= 1e-3.
    strategy = F32.filter(lambda c: c.spread == 1e-2 and c.eps >= 1e-3)
    with pytest.raises(MetamorphicFailure, match="scaled by"):
        run_relation("gpu-norm", "scale-equivariant", strategy, impl=eps_outside_sqrt)


def test_shift_invariant_catches_a_missing_mean_subtraction():
    with pytest.raises(MetamorphicFailure, match="shifted"):
        run_relation("gpu-norm", "shift-invariant", LAYER, impl=no_mean_subtraction)
