"""gpu-softmax's op relations pass on the kernel and fail on a planted bug each."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from kernel_harness.checks.metamorphic import MetamorphicFailure
from kernel_harness.families.gpu_softmax import kernel
from kernel_harness.ops.softmax.cases import SoftmaxCase, softmax_cases
from kernel_harness.ops.softmax.reference import reference
from kernel_harness.ops.softmax.relations import shift_invariant
from tests.helpers.relation_runs import run_relation

MULTI_ROW = softmax_cases(dtypes=("float32",)).filter(lambda c: c.rows > 1)


def rows_coupled(x, *, axis=-1, interpret=False):
    """Planted: every row reads the mean of all logits (a reduction over the wrong axis)."""
    return kernel.softmax(x, axis=axis, interpret=interpret) * (1 + 1e-3 * jnp.tanh(x.mean()))


def no_max_subtraction(x, *, axis=-1, interpret=False):
    """Planted: exp(x) / sum(exp(x)) without the max (overflows for large shifts)."""
    e = jnp.exp(x.astype(jnp.float32))
    return (e / e.sum(axis=-1, keepdims=True)).astype(x.dtype)


@pytest.mark.parametrize("name", ["rows-independent", "shift-invariant"])
def test_relation_passes_on_the_kernel(name):
    observer = run_relation("gpu-softmax", name, MULTI_ROW)
    assert observer.examples >= 1 and observer.failed == 0


def test_rows_independent_catches_rows_that_read_each_other():
    with pytest.raises(MetamorphicFailure, match="bitwise"):
        run_relation("gpu-softmax", "rows-independent", MULTI_ROW, impl=rows_coupled)


def test_shift_invariant_catches_a_missing_max_subtraction():
    with pytest.raises(MetamorphicFailure, match="shift"):
        run_relation("gpu-softmax", "shift-invariant", MULTI_ROW, impl=no_max_subtraction,
                     max_examples=4)


@pytest.mark.parametrize("mask_value", ["-1e9", "finfo-min", "-inf"])
@pytest.mark.parametrize("shift", [-1000.0, 100.0, 1.0])
def test_the_shifted_expectation_is_the_softmax_of_the_shifted_logits(mask_value, shift):
    """Logits at a sentinel's level (-1e9 + N(0,1) rounds to -1e9 in float32) make the
    masked lanes part of a uniform row: the shift moves them too, with their rounding (the
    fresh-clone CI of 323e6d9 drew this case, x=(2,3,129), and the relation's expectation
    gave the sentinel lanes no probability)."""
    case = SoftmaxCase(dtype="float32", seed=3, leading=(2, 3), n=129, offset=-1e9,
                       scale=1.0, masked_suffix=128, mask_value=mask_value)
    inputs = case.materialize()
    variant = shift_invariant(case, inputs, lambda strategy, label: shift)
    base = {"out": np.asarray(reference(case, inputs)["out"])}
    want = np.asarray(reference(case, variant.inputs)["out"])
    got = variant.expected(base)["out"]
    np.testing.assert_allclose(got.reshape(want.shape), want, atol=1e-6)
