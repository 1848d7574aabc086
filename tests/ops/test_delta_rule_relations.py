"""The delta-rule op's relations hold for its own reference (so a kernel that breaks one is
wrong, not the relation), and say nothing where they cannot apply."""

from __future__ import annotations

import dataclasses

import numpy as np

from kernel_harness.ops.delta_rule.cases import DeltaRuleCase
from kernel_harness.ops.delta_rule.reference import reference
from kernel_harness.ops.delta_rule.relations import (
    documents_independent,
    linear_in_v,
    state_continuity,
)

CASE = DeltaRuleCase(dtype="float32", seed=3, batch=2, seq_len=40, key_heads=1,
                     value_heads=2, key_dim=8, value_dim=4, chunk_size=16,
                     documents=((13, 27), (40,)), initial_state=True, qk_l2norm=True)


def _draw(value):
    """A ``draw`` that answers ``value`` (the relation's one choice)."""
    def draw(strategy, label=""):
        return value
    return draw


def _answers(*values):
    """A ``draw`` answering ``values`` in order (row, document, data seed...)."""
    it = iter(values)

    def draw(strategy, label=""):
        return next(it)
    return draw


def _variant_holds(variant, base, *, atol):
    got = reference(variant.case, variant.inputs)
    for name, want in variant.expected(base).items():
        mask = np.broadcast_to(variant.compared.get(name, True), np.shape(want))
        np.testing.assert_allclose(got[name][mask], np.asarray(want)[mask], rtol=0, atol=atol,
                                   err_msg=name)


def test_state_continuity_holds_for_the_reference():
    base_inputs = CASE.materialize()
    base = reference(CASE, base_inputs)
    for split in (20,):
        variant = state_continuity(CASE, base_inputs, _draw(split))
        assert variant.case.seq_len == 40 - split and variant.case.initial_state
        _variant_holds(variant, base, atol=2e-6)


def test_state_continuity_never_splits_at_a_document_start():
    """Token 13 starts row 0's second document: never a split; a row of one-token
    documents has no split at all (the relation says nothing)."""
    offered = []

    def draw(strategy, label=""):
        offered.extend(strategy.elements)
        return offered[0]
    state_continuity(CASE, CASE.materialize(), draw)
    assert 13 not in offered and set(offered) == set(range(1, 40)) - {13}
    one_token_docs = dataclasses.replace(CASE, batch=1, seq_len=3, documents=((1, 1, 1),))
    assert state_continuity(one_token_docs, one_token_docs.materialize(), draw) is None


def test_linear_in_v_holds_bitwise_for_the_reference():
    inputs = CASE.materialize()
    base = reference(CASE, inputs)
    variant = linear_in_v(CASE, inputs, _draw(4.0))
    _variant_holds(variant, base, atol=0.0)


def test_documents_independent_holds_bitwise_for_the_reference():
    """Row 0's first document (tokens 0..12, the one the initial state feeds) and its
    second (the row's last: the final state not compared) in turn given other data."""
    inputs = CASE.materialize()
    base = reference(CASE, inputs)
    for doc in (0, 1):
        variant = documents_independent(CASE, inputs, _answers(0, doc, 7))
        assert ("dh0" in variant.compared) == (doc == 0)
        assert ("final_state" in variant.compared) == (doc == 1)
        assert not np.array_equal(variant.inputs["v"], inputs["v"])
        _variant_holds(variant, base, atol=0.0)
    single = dataclasses.replace(CASE, documents=())
    assert documents_independent(single, single.materialize(), _draw(0)) is None
