"""Cases aimed at an implementation's own constants (round 12 of the adversarial set: value
gates between the strategies' regimes): the constant found in the program, the case that
reaches past it run first, and its failure saying where it came from."""

from __future__ import annotations

import pytest

from kernel_harness import testing
from kernel_harness.checks import aimed
from kernel_harness.core.backends import resolve_backend
from kernel_harness.ops.norm.cases import aimed_cases as norm_aimed
from kernel_harness.ops.softmax.cases import aimed_cases as softmax_aimed
from kernel_harness.records import registry
from kernel_harness.testing import HarnessCheckFailed
from tests.helpers import kernel_body_cheats as cheats


@pytest.mark.triton_ops  # gpu-softmax's kernel: jax <= 0.12.0.1
def test_the_constants_only_the_implementation_holds_are_found():
    family = registry.get_family("gpu-softmax")
    backend = resolve_backend("interpret")
    assert aimed.constants(family, cheats.rounded_past_1e7, backend) == [1e7]
    assert aimed.constants(family, family.kernel, backend) == []
    assert aimed.cases(family, None, backend) == []


@pytest.mark.triton_ops
def test_a_value_gate_fails_at_a_case_aimed_past_its_constant():
    with pytest.raises(HarnessCheckFailed) as e:
        testing.check("gpu-softmax", impl=cheats.rounded_past_1e7, profile="ci",
                      properties=["matches-reference"], max_examples=2)
    text = str(e.value)
    assert "logits~1.01e+07" in text or "logits~9.9e+06" in text, text
    assert "one of the cases aimed at the implementation's own constants" in text, text


def test_the_aimed_cases_reach_just_past_the_constant_on_either_side():
    rows = softmax_aimed(-1e5, frozenset())
    assert {c.offset for c in rows if c.dtype == "float32"} == {-1e5 * 1.01, -1e5 * 0.99}
    assert all(c.scale >= 1.0 for c in rows)
    assert not any(c.dtype == "float16" for c in softmax_aimed(1e7, frozenset()))
    norms = norm_aimed(1e6, frozenset({"rms-norm"}))
    assert {c.spread for c in norms} == {1e6 * 1.01, 1e3 * 1.01}
    assert {c.eps for c in norm_aimed(1e-10, frozenset())} >= {1e-10 * 1.01}
