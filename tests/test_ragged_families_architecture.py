"""The ragged paged attention op is the op's (issue 54): a ragged family declares only its
kernel's layout, blocks, call and facts, never a field of the op's batch, its padding
exclusion or a hook the op derives from the batch.

The ragged families: tpu-ragged-paged (on :class:`~kernel_harness.ops.paged_attention.
sequences.RaggedBatch`), tpu-inference's rpa v3 and its head-dim-64 variant (on
:class:`~kernel_harness.ops.paged_attention.kv_update.KvUpdateCase`) and MLA v2 (on
:class:`~kernel_harness.ops.paged_attention.passes.PassesCase`).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect

from kernel_harness.ops.paged_attention.kv_update import KvUpdateCase
from kernel_harness.ops.paged_attention.passes import PassesCase
from kernel_harness.ops.paged_attention.sequences import RaggedBatch
from tests.helpers.restatements import (
    FAMILIES,
    classes,
    declared_fields,
    defined,
    restatements,
)

ON_THE_OP = ("tpu_ragged_paged", "tpu_inference_rpa_v3", "tpu_inference_rpa_hd64",
             "tpu_inference_mla_v2", "flywheel_tpu_varlen_paged")


def _public_methods(cls: type) -> frozenset[str]:
    """The methods and properties ``cls`` itself defines (not its bases), dunders aside."""
    return frozenset(name for name, member in vars(cls).items()
                     if not name.startswith("_")
                     and (inspect.isfunction(member) or isinstance(member, property)))


def _own_fields(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


#: The ragged problem's fields: the batch and its passes.
PROBLEM_FIELDS = _own_fields(PassesCase)
#: The op's padding exclusion in every spelling the families used, and what the op's batch
#: and passes derive (the page walk, padded operands, passes): a family defining one
#: restates a rule of the op.
OP_HOOKS = frozenset({"valid", "may_be_nonfinite", "excluded"}) | _public_methods(
    RaggedBatch) | _public_methods(PassesCase)
#: What the K/V-update op derives for a case on it (a family gives only ``head_dim`` and
#: its layout, ``write_token`` and ``token_kv``).
KV_UPDATE_FIELDS = _own_fields(KvUpdateCase) - PROBLEM_FIELDS
KV_UPDATE_HOOKS = _public_methods(KvUpdateCase) - {"write_token", "token_kv"}


def violations(source: str) -> list[str]:
    """What a family module restates of the op: a class field named like one of the ragged
    problem's fields (or, on the K/V-update op's case, one of its fields), a function or
    method named like one of the op's hooks (or a K/V-update method on a case on it)."""
    tree = ast.parse(source)
    found = defined(tree, OP_HOOKS)
    for node in classes(tree):
        on_kv_update = any(isinstance(b, ast.Name) and b.id == KvUpdateCase.__name__
                           for b in node.bases)
        fields = PROBLEM_FIELDS | (KV_UPDATE_FIELDS if on_kv_update else frozenset())
        found += [f"{node.name} declares the op's field {name}"
                  for name in declared_fields(node, fields)]
        found += [f"{node.name} defines the op's {item.name}()" for item in node.body
                  if on_kv_update and isinstance(item, ast.FunctionDef)
                  and item.name in KV_UPDATE_HOOKS]
    return found


def test_no_ragged_family_restates_its_op() -> None:
    found = {family: v for family in ON_THE_OP if (v := restatements(family, violations))}
    assert not found, f"ragged families restate the ragged paged attention op: {found}"


def test_a_planted_restatement_is_found() -> None:
    planted = '''
class MyCase(KvUpdateCase):
    page_size: int = 4
    q_scale: float | None = 0.5
    blocks: int = 2

    def sequence_kv(self, cache, i):
        return cache

def valid(case):
    rows = case.token_rows()
    return {} if rows.all() else {"out": rows[:, None, None]}

class Batch:
    def token_rows(self):
        return None
'''
    assert sorted(violations(planted)) == [
        "MyCase declares the op's field page_size", "MyCase declares the op's field q_scale",
        "MyCase defines the op's sequence_kv()", "defines token_rows()", "defines valid()"]


def test_every_ragged_family_is_on_the_op() -> None:
    ragged = {p.parent.name for p in FAMILIES.glob("*/cases.py")
              if any(f"ops.paged_attention.{m}" in p.read_text()
                     for m in ("sequences", "passes", "kv_update"))}
    assert ragged <= set(ON_THE_OP), sorted(ragged)
