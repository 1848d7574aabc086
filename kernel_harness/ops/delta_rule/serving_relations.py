"""The relations of the delta-rule op's serving form (:mod:`.serving`), each a property of
its own name.

- state-continuity: one fresh or continued sequence of the call, split at a token T
  inside it, served from T on as a continued sequence (history + T tokens before it)
  that reads its conv state and recurrent state from a slot holding the states after
  token T, gives the whole call's out rows of those tokens and the same written slots of
  both pools. The other sequences are served as they were. The call keeps its shapes
  (the dropped rows move to the end of the stream, as padding rows), so a kernel of fixed
  shapes runs the program it compiled for the drawn case. The states after T are the
  op's reference's (the conv state: the last K - 1 raw inputs, exact; the recurrent
  state: the token-serial float32 scan), so the two kernel runs, each within the
  tolerance of the truth, agree within twice it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import Arrays
from kernel_harness.ops.delta_rule.serving import ServingCase, serving_reference
from kernel_harness.records.relations import Draw, Relation, Variant

#: The inputs with one row per token of the packed stream.
_PER_TOKEN = ("qkv", "b", "a")


def states_after(case: ServingCase, inputs: Arrays, seq: int, split: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Sequence ``seq``'s conv state [K - 1, dim] and recurrent state [n_v, d_k, d_v]
    after its first ``split`` tokens (float32): the op's reference on those tokens
    alone, from the states the sequence starts with."""
    start = int(case.starts()[seq])
    head = dataclasses.replace(
        case, lengths=(split,), histories=(case.histories[seq],), num_decode=0,
        write_slots=(case.write_slots[seq],), read_slots=(case.read_slots[seq],))
    moved = {n: np.roll(inputs[n], -start, axis=0) if n in _PER_TOKEN else inputs[n]
             for n in inputs}
    ref = serving_reference(head, moved)
    slot = case.write_slots[seq]
    return ref["conv_state"][slot], ref["recurrent_state"][slot]


def _resume_slot(case: ServingCase, seq: int) -> int:
    """Where the split sequence reads its states: its own read slot, unless another
    sequence resumes from that slot too (then its write slot, which no other reads)."""
    slot = case.read_slots[seq]
    shared = any(r == slot and h > 0 for s, (r, h) in enumerate(
        zip(case.read_slots, case.histories, strict=True)) if s != seq)
    return case.write_slots[seq] if shared else slot


def state_continuity(case: ServingCase, inputs: Arrays, draw: Draw) -> Variant | None:
    """A drawn sequence's tokens from a drawn split on, resumed from the states there."""
    seqs = [s for s in range(case.num_decode, len(case.lengths)) if case.lengths[s] > 1]
    if not seqs:
        return None
    seq = draw(st.sampled_from(seqs), label="sequence")
    split = draw(st.integers(1, case.lengths[seq] - 1), label="split token")
    start = int(case.starts()[seq])
    slot = _resume_slot(case, seq)
    conv_after, recurrent_after = states_after(case, inputs, seq, split)

    def dropped(rows: np.ndarray) -> np.ndarray:
        """The stream without the sequence's first ``split`` rows, those rows appended."""
        rows = np.asarray(rows)
        return np.concatenate([rows[:start], rows[start + split:],
                               rows[start:start + split]])

    later = dataclasses.replace(
        case,
        lengths=tuple(n - split if s == seq else n for s, n in enumerate(case.lengths)),
        histories=tuple(h + split if s == seq else h for s, h in enumerate(case.histories)),
        read_slots=tuple(slot if s == seq else r for s, r in enumerate(case.read_slots)))
    moved = {n: dropped(inputs[n]) if n in _PER_TOKEN else inputs[n] for n in inputs}
    moved["conv_state"] = np.array(inputs["conv_state"])
    moved["conv_state"][slot] = conv_after
    moved["recurrent_state"] = np.array(inputs["recurrent_state"])
    moved["recurrent_state"][slot] = recurrent_after
    moved.update(later.metadata())

    def expected(base: Arrays) -> Arrays:
        out = np.asarray(base["out"])
        pools = {n: np.array(base[n]) for n in ("conv_state", "recurrent_state")}
        if slot not in case.write_slots:  # a slot no sequence writes keeps what it holds
            pools["conv_state"][slot] = conv_after
            pools["recurrent_state"][slot] = recurrent_after
        rows = np.concatenate([out[:start], out[start + split:], np.zeros_like(out[:split])])
        return {"out": rows, **pools}

    return Variant(case=later, inputs=moved, expected=expected,
                   note=f"sequence {seq}'s tokens {split}.. (rows {start + split}.."
                   f"{start + case.lengths[seq] - 1}) alone, resumed from slot {slot} "
                   f"holding the states after its token {split}")


RELATIONS: tuple[Relation, ...] = (
    Relation(name="state-continuity", doc="A sequence split at a token and served from "
             "there, resuming from a slot holding the states after that token, gives the "
             "whole call's out rows of those tokens and the same written slots of both "
             "pools.", variant=state_continuity, fraction=0.2),
)

#: The public name of :data:`RELATIONS`: a delta-rule serving family's ``relations``.
SERVING_RELATIONS = RELATIONS
