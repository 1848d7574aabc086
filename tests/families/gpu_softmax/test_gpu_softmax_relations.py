"""gpu-softmax's op relations pass on the kernel and fail on a planted bug each."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from kernel_harness.checks.metamorphic import MetamorphicFailure
from kernel_harness.families.gpu_softmax import kernel
from kernel_harness.ops.softmax.cases import softmax_cases
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
