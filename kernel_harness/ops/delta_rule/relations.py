"""The delta-rule op's relations (each a property of its own name).

- state-continuity: the sequence split at a token T (not a document start), the second
  part run alone with the state after token T as its initial state, gives the whole run's
  out, final_state and gradients of tokens T.. (the gradient of a token depends only on the
  state before it and on the later cotangents). The state at T is the reference's (the
  token-serial float32 scan), so the two kernel runs agree within twice the tolerance.
- documents-independent: one document's q, k, v, b, w and cotangent replaced (drawn as
  the case draws them) leave every other document's out and gradients unchanged, the
  final state where the document is not its row's last, dh0 where it is not its row's
  first (within twice the tolerance: a chunk mixing documents masks their interactions,
  it may round differently). g is kept: a chunked kernel relates a chunk's tokens through
  the chunk's cumulative decay, so another document's decay legitimately moves the
  rounding (deltanet-tpu's ``mask_lambda_by_doc``), and a burst of strong decay in one
  document costs the next one precision: findings/, not a leak between documents.
- linear-in-v: v and the initial state scaled by a power of two c scale out, final_state,
  dq, dk, dg, db and dw by c and leave dv and dh0 unchanged (S is linear in (v, h0)
  jointly; the adjoint of S does not read v); exact in binary floating point.

Each relation speaks of the outputs the family's run returns: a forward-only family (out
and final_state) gets the same relations on those two.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import Arrays
from kernel_harness.ops.delta_rule.cases import DeltaRuleCase
from kernel_harness.ops.delta_rule.reference import document_starts, recurrence
from kernel_harness.records.relations import Draw, Relation, Variant

_PER_TOKEN = ("q", "k", "v", "g", "b", "w", "dout")
_GRADIENTS = ("dq", "dk", "dv", "dg", "db", "dw")


def _state_after(case: DeltaRuleCase, inputs: Arrays, split: int) -> np.ndarray:
    """The reference's state after the first ``split`` tokens (float32)."""
    h0 = inputs.get("h0")
    if h0 is None:
        h0 = np.zeros((case.batch, case.value_heads, case.key_dim, case.value_dim), np.float32)
    arrays = [jnp.asarray(inputs[n][:, :split], jnp.float32) for n in _PER_TOKEN[:-1]]
    starts = jnp.asarray(document_starts(case)[:, :split])
    _, state = recurrence(*arrays, jnp.asarray(h0, jnp.float32), starts,
                          qk_l2norm=case.qk_l2norm)
    return np.asarray(state, np.float32)


def _rest(lengths: tuple[int, ...], split: int) -> tuple[int, ...]:
    """The document lengths of a row from token ``split`` on."""
    out, start = [], 0
    for n in lengths:
        if start + n > split:
            out.append(start + n - max(start, split))
        start += n
    return tuple(out)


def state_continuity(case: DeltaRuleCase, inputs: Arrays, draw: Draw) -> Variant | None:
    """The tokens from a drawn split on, with the state there as the initial state."""
    starts = document_starts(case).any(axis=0)
    splits = [t for t in range(1, case.seq_len) if not starts[t]]
    if not splits:
        return None
    split = draw(st.sampled_from(splits), label="split token")
    documents = tuple(_rest(d, split) for d in case.documents)
    later = dataclasses.replace(case, seq_len=case.seq_len - split, initial_state=True,
                                zero_chunk=None,
                                documents=() if all(len(d) == 1 for d in documents)
                                else documents)
    moved = {n: inputs[n][:, split:] for n in _PER_TOKEN}
    moved.update(dstate=inputs["dstate"], h0=_state_after(case, inputs, split))

    def expected(base: Arrays) -> Arrays:
        out = {n: np.asarray(base[n])[:, split:] for n in ("out", *_GRADIENTS) if n in base}
        return {**out, "final_state": base["final_state"]}

    return Variant(case=later, inputs=moved, expected=expected,
                   note=f"tokens {split}.. alone, the state after token {split} passed in")


def documents_independent(case: DeltaRuleCase, inputs: Arrays, draw: Draw
                          ) -> Variant | None:
    """One drawn document of one row given other data: the rest unchanged."""
    rows = [r for r, d in enumerate(case.documents) if len(d) > 1]
    if not rows:
        return None
    row = draw(st.sampled_from(rows), label="row")
    lengths = case.documents[row]
    doc = draw(st.integers(0, len(lengths) - 1), label="document")
    start = sum(lengths[:doc])
    span = slice(start, start + lengths[doc])
    rng = np.random.default_rng(draw(st.integers(0, 2**16), label="data seed"))
    moved = {n: np.array(a) for n, a in inputs.items()}
    for name in ("q", "k", "v", "b", "w", "dout"):
        block = moved[name][row, span]
        if name in ("b", "w"):
            fresh = rng.uniform(0.0, 1.0, block.shape)
        else:
            fresh = rng.standard_normal(block.shape)
        if name == "k" and not case.qk_l2norm:
            fresh /= np.sqrt(case.key_dim)  # |k| ~ 1, as drawn: the delta rule stays stable
        moved[name][row, span] = fresh.astype(block.dtype)
    outside = np.ones((case.batch, case.seq_len, 1, 1), bool)
    outside[row, span] = False
    whole_row = np.ones((case.batch, 1, 1, 1), bool)
    whole_row[row] = False
    compared = {n: outside for n in ("out", *_GRADIENTS)}
    if doc == len(lengths) - 1:
        compared["final_state"] = whole_row
    if doc == 0 and case.initial_state:
        compared["dh0"] = whole_row
    names = ["out", "final_state", *_GRADIENTS] + (["dh0"] if case.initial_state else [])
    return Variant(case=case, inputs=moved, compared=compared,
                   expected=lambda base: {n: base[n] for n in names if n in base},
                   note=f"row {row}'s document {doc} (tokens {span.start}..{span.stop - 1}) "
                   "given other data")


def linear_in_v(case: DeltaRuleCase, inputs: Arrays, draw: Draw) -> Variant | None:
    """v (and h0) times a power of two c: out, final_state, dq, dk, dg, db, dw times c."""
    c = draw(st.sampled_from((2.0, 0.5, 4.0)), label="factor")
    moved = dict(inputs, v=inputs["v"] * np.asarray(c, inputs["v"].dtype))
    if "h0" in inputs:
        moved["h0"] = inputs["h0"] * np.asarray(c, inputs["h0"].dtype)
    scaled = ("out", "final_state", "dq", "dk", "dg", "db", "dw")

    def expected(base: Arrays) -> Arrays:
        out = {n: np.asarray(base[n]) * c for n in scaled if n in base}
        unscaled = ("dv", "dh0") if case.initial_state else ("dv",)
        return {**out, **{n: base[n] for n in unscaled if n in base}}

    return Variant(case=case, inputs=moved, expected=expected, exact=True,
                   note=f"v and h0 times {c:g}")


def as_mha(case: DeltaRuleCase, inputs: Arrays) -> tuple[DeltaRuleCase, Arrays] | None:
    """The ``Metamorphic.as_mha`` hook (``gqa-equals-mha``): the same problem with one key
    head per value head (q, k, g and b repeated over each group), or None where the heads
    are not grouped. out and final_state are per value head, so they must not change; a
    family with gradients names the key-head axis of dq, dk, dg and db ``kv_head`` (the
    MHA run's are then summed over each group)."""
    if case.value_heads == case.key_heads:
        return None
    group = case.value_heads // case.key_heads
    moved = {n: np.repeat(a, group, axis=2) if n in ("q", "k", "g", "b") else a
             for n, a in inputs.items()}
    return dataclasses.replace(case, key_heads=case.value_heads), moved


RELATIONS: tuple[Relation, ...] = (
    Relation(name="state-continuity", doc="The tokens after a split, run with the state "
             "there as the initial state, give the whole run's outputs and gradients of "
             "those tokens and its final state.", variant=state_continuity, fraction=0.2),
    Relation(name="documents-independent", doc="Replacing one document's tokens leaves "
             "the other documents' outputs and gradients unchanged.",
             variant=documents_independent, fraction=0.15),
    Relation(name="linear-in-v", doc="Scaling v and the initial state by a power of two "
             "scales out, final_state, dq, dk, dg, db and dw by it; dv and dh0 unchanged.",
             variant=linear_in_v, fraction=0.15),
)

#: The public name of :data:`RELATIONS` (``from kernel_harness import DELTA_RULE_RELATIONS``):
#: a delta-rule family's ``relations``.
DELTA_RULE_RELATIONS = RELATIONS
#: The public name of :func:`as_mha` (``from kernel_harness import delta_rule_as_mha``).
delta_rule_as_mha = as_mha
