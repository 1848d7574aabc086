"""The attention problem is the op's (issue 54): a family built on it declares only its
kernel's configuration, call and facts, never a field or hook of the problem again.

Every attention family is on the op's problem: sdpa, torch-sdpa, flash, gpu-mha,
gpu-decode and splash.
"""

from __future__ import annotations

import ast
import dataclasses

import pytest

from kernel_harness.ops.attention.problem import AttentionProblem
from tests.helpers.restatements import (
    FAMILIES,
    classes,
    declared_fields,
    defined,
    restatements,
)

ON_THE_PROBLEM = ("sdpa", "torch_sdpa", "flash", "gpu_mha", "gpu_decode", "splash",
                  "flywheel_tpu_flash", "flywheel_tpu_varlen")
#: Hooks the op derives from the problem (segments included): a family defining one
#: restates a rule of the op.
OP_HOOKS = frozenset({"materialize", "visible", "valid", "may_be_nonfinite", "constrain",
                      "option_toggles", "as_mha", "segments", "data_draws"})
PROBLEM_FIELDS = frozenset(f.name for f in dataclasses.fields(AttentionProblem))


def violations(source: str) -> list[str]:
    """What a family module restates of the problem: a class field named like one of the
    problem's fields, a function or method named like one of its hooks."""
    tree = ast.parse(source)
    return defined(tree, OP_HOOKS) + [
        f"{node.name} declares the problem's field {name}"
        for node in classes(tree) for name in declared_fields(node, PROBLEM_FIELDS)]


@pytest.mark.parametrize("family", ON_THE_PROBLEM)
def test_a_family_on_the_problem_restates_none_of_it(family: str) -> None:
    found = restatements(family, violations)
    assert not found, f"{family} restates the attention problem: {found}"


def test_a_planted_restatement_is_found() -> None:
    planted = '''
class MyCase(AttentionProblem):
    window: tuple[int, int] | None = None
    block_q: int = 128

def valid(case):
    return {}

class Hooks:
    def option_toggles(self, case):
        return []
'''
    assert sorted(violations(planted)) == ["MyCase declares the problem's field window",
                                           "defines option_toggles()", "defines valid()"]


def test_every_attention_family_is_on_the_problem() -> None:
    attention = {p.parent.name for p in FAMILIES.glob("*/cases.py")
                 if "ops.attention" in p.read_text()}
    assert attention <= set(ON_THE_PROBLEM), sorted(attention)
