"""The delta-rule serving form's state-continuity relation holds for the op's own reference
(so a kernel that breaks it is wrong, not the relation), keeps the call's shapes (a
fixed-shape kernel compiles nothing new), and catches a kernel that ignores the states a
continued sequence reads, judged as the harness judges it (twice the families' 4e-2)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kernel_harness.checks.metamorphic.arrays import differences
from kernel_harness.ops.delta_rule.serving import ServingCase, serving_reference
from kernel_harness.ops.delta_rule.serving_relations import (
    SERVING_RELATIONS,
    state_continuity,
    states_after,
)

SMALL = dict(dtype="bfloat16", tokens=24, max_seqs=4, slots=8, key_dim=8, value_dim=8,
             chunk_size=8)
#: A decode, a fresh 11-token sequence reading an untouched slot, a continued 6-token one;
#: grouped heads, weak decay (the state carries far).
CASE = ServingCase(seed=4, **SMALL, value_heads=2, lengths=(1, 11, 6), histories=(5, 0, 3),
                   num_decode=1, write_slots=(2, 5, 1), read_slots=(2, 6, 1), decay="weak")
KDA = dataclasses.replace(CASE, seed=6, gate="channel", kernel_size=3, conv_bias=False)
#: The families judge out and the recurrent pool at 4e-2 of the scale, the relation twice it.
RELATION_TOLERANCE = 2 * 4e-2


def _answers(*values):
    """A ``draw`` answering ``values`` in order (the sequence, then the split)."""
    it = iter(values)

    def draw(strategy, label=""):
        return next(it)
    return draw


def _worst(expected, got):
    """Per output, the largest difference over the expected output's scale."""
    return {n: differences(want, got[n], None, 0.0)[1] for n, want in expected.items()}


@pytest.mark.parametrize("case", [CASE, KDA], ids=["gdn", "kda-k3"])
@pytest.mark.parametrize(("seq", "split"), [(1, 1), (1, 2), (1, 9), (1, 10), (2, 1),
                                            (2, 5)])
def test_state_continuity_holds_for_the_reference(case, seq, split):
    """Splits before, at and past the conv state's K - 1 tokens, in a fresh sequence and a
    continued one: the reference on the variant gives the base's rows and pools to float32
    rounding (the conv pool bit for bit: raw inputs moved)."""
    x = case.materialize()
    base = serving_reference(case, x)
    variant = state_continuity(case, x, _answers(seq, split))
    got = serving_reference(variant.case, variant.inputs)
    want = variant.expected(base)
    assert set(want) == {"out", "conv_state", "recurrent_state"}
    np.testing.assert_array_equal(got["conv_state"], want["conv_state"])
    for name, worst in _worst(want, got).items():
        assert worst <= 2e-6, (name, worst)
    later = variant.case
    assert later.lengths[seq] == case.lengths[seq] - split
    assert later.histories[seq] == case.histories[seq] + split
    assert not want["out"][sum(later.lengths):].any()


def test_the_variant_keeps_the_call_s_shapes():
    """Only data fields change (lengths, histories, read slots): the same static key, so
    the same compiled program, and every array the same shape and dtype; the metadata is
    the variant case's, the moved rows are a permutation of the stream's."""
    x = CASE.materialize()
    variant = state_continuity(CASE, x, _answers(1, 4))
    assert variant.case.static_key() == CASE.static_key()
    assert variant.case.tokens == CASE.tokens
    for name, array in x.items():
        moved = variant.inputs[name]
        assert moved.shape == array.shape and moved.dtype == array.dtype, name
    assert variant.inputs["query_start_loc"].tolist() == [0, 1, 8, 14, 14]
    assert variant.inputs["seq_lens"].tolist() == [6, 11, 9, 0]
    rows = np.sort(np.asarray(variant.inputs["qkv"], np.float32), axis=0)
    np.testing.assert_array_equal(rows, np.sort(np.asarray(x["qkv"], np.float32), axis=0))


def test_the_slot_holds_the_states_after_the_split():
    """The resume slot holds the reference's states after token T: the conv state the last
    K - 1 raw inputs (from the sequence's own conv state where T < K - 1), the recurrent
    state what the reference writes after serving tokens 0..T-1 of the sequence."""
    x = CASE.materialize()
    conv, rec = states_after(CASE, x, 2, 2)
    qkv = np.asarray(x["qkv"], np.float32)
    start = int(CASE.starts()[2])
    np.testing.assert_array_equal(conv, np.concatenate(
        [x["conv_state"][CASE.read_slots[2]][-1:], qkv[start:start + 2]]))
    variant = state_continuity(CASE, x, _answers(2, 2))
    np.testing.assert_array_equal(variant.inputs["recurrent_state"][1], rec)
    assert not np.array_equal(rec, x["recurrent_state"][1])


def test_a_shared_read_slot_is_not_overwritten():
    """Two sequences resuming from one slot: the split one resumes from its write slot
    instead, so the other still reads what it read."""
    case = dataclasses.replace(CASE, read_slots=(6, 6, 1), histories=(5, 2, 3))
    x = case.materialize()
    variant = state_continuity(case, x, _answers(1, 3))
    assert variant.case.read_slots == (6, 5, 1)
    np.testing.assert_array_equal(variant.inputs["conv_state"][6], x["conv_state"][6])
    got = serving_reference(variant.case, variant.inputs)
    for name, worst in _worst(variant.expected(serving_reference(case, x)), got).items():
        assert worst <= 2e-6, (name, worst)


def test_decodes_and_one_token_sequences_are_never_split():
    """The decode (sequence 0) is never offered; no sequence of two tokens: no variant."""
    offered = []

    def draw(strategy, label=""):
        if label == "sequence":
            offered.extend(strategy.elements)
            return offered[0]
        return 1
    state_continuity(CASE, CASE.materialize(), draw)
    assert offered == [1, 2]
    ones = dataclasses.replace(CASE, lengths=(1, 1, 1))
    assert state_continuity(ones, ones.materialize(), draw) is None


def _ignoring(which):
    """The reference with a planted bug: a sequence that is neither a decode nor fresh
    starts from zeros in place of its read slot's ``which`` state (a kernel that skips
    the read for continued prefills)."""
    def kernel(case, inputs):
        x = {n: np.array(a) for n, a in inputs.items()}
        for s in range(case.num_decode, len(case.lengths)):
            if case.histories[s]:
                x[which][case.read_slots[s]] = 0.0
        out = serving_reference(case, x)
        for name in ("conv_state", "recurrent_state"):  # the pools' other slots as passed
            untouched = [s for s in range(case.slots) if s not in case.write_slots]
            out[name][untouched] = np.asarray(inputs[name])[untouched]
        return out
    return kernel


@pytest.mark.parametrize("which", ["recurrent_state", "conv_state"])
@pytest.mark.parametrize("case", [CASE, KDA], ids=["gdn", "kda-k3"])
def test_a_kernel_ignoring_a_continued_sequence_s_state_breaks_it(case, which):
    """Split in the fresh sequence (which the bug does not touch, so the base run is
    right): the variant resumes, the planted kernel ignores what it reads, and its out
    rows leave twice the tolerance."""
    kernel = _ignoring(which)
    x = case.materialize()
    variant = state_continuity(case, x, _answers(1, 2))
    worst = _worst(variant.expected(kernel(case, x)), kernel(variant.case, variant.inputs))
    assert worst["out"] > RELATION_TOLERANCE, worst


def test_the_relation_is_declared():
    assert [r.name for r in SERVING_RELATIONS] == ["state-continuity"]
    assert SERVING_RELATIONS[0].variant is state_continuity
