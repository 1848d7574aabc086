"""The delta-rule op's relations hold for its own reference (so a kernel that breaks one is
wrong, not the relation), and say nothing where they cannot apply."""

from __future__ import annotations

import dataclasses

import numpy as np

from kernel_harness.ops.delta_rule.cases import DeltaRuleCase
from kernel_harness.ops.delta_rule.reference import reference
from kernel_harness.ops.delta_rule.relations import (
    as_mha,
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


def test_a_forward_only_family_gets_each_relation_on_out_and_final_state():
    """The relations speak of the outputs a run returns: from a forward-only run (out and
    final_state, ``reference(..., gradients=False)``) they expect those two only, and they
    still hold."""
    inputs = CASE.materialize()
    full = reference(CASE, inputs)
    forward = reference(CASE, inputs, gradients=False)
    assert set(forward) == {"out", "final_state"}
    for name in forward:
        np.testing.assert_array_equal(forward[name], full[name])
    for variant in (state_continuity(CASE, inputs, _draw(20)),
                    linear_in_v(CASE, inputs, _draw(2.0)),
                    documents_independent(CASE, inputs, _answers(0, 1, 7))):
        assert set(variant.expected(forward)) == {"out", "final_state"}
        got = reference(variant.case, variant.inputs, gradients=False)
        for name, want in variant.expected(forward).items():
            mask = np.broadcast_to(variant.compared.get(name, True), np.shape(want))
            np.testing.assert_allclose(got[name][mask], np.asarray(want)[mask], rtol=0,
                                       atol=2e-6, err_msg=name)


def test_as_mha_is_the_same_problem_and_tells_the_groups_apart():
    """Key heads repeated to one per value head give the reference's out and final state
    bitwise; the groups laid out the other way (value head j reading key head j % Hk, a
    kernel's wrong index map) do not; heads not grouped: None."""
    case = dataclasses.replace(CASE, key_heads=2, value_heads=4)
    inputs = case.materialize()
    base = reference(case, inputs, gradients=False)
    mha_case, mha_inputs = as_mha(case, inputs)
    assert mha_case.key_heads == mha_case.value_heads == 4
    for name, want in reference(mha_case, mha_inputs, gradients=False).items():
        np.testing.assert_array_equal(want, base[name], err_msg=name)
    tiled = {n: np.tile(a, (1, 1, 2, 1)) if n in ("q", "k", "g", "b") else a
             for n, a in inputs.items()}
    assert not np.allclose(reference(mha_case, tiled, gradients=False)["out"], base["out"])
    assert as_mha(CASE, CASE.materialize()) is not None  # (1, 2): grouped
    ungrouped = dataclasses.replace(CASE, value_heads=1)
    assert as_mha(ungrouped, ungrouped.materialize()) is None
