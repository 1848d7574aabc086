"""The grouped matmul op's relations (out = per-group lhs @ rhs, with its vjp).

- groups-permuted: permuting the groups of the rhs shard (their sizes, their rhs blocks
  and their rows of lhs and do, as blocks) permutes the rows of out and dlhs and the
  blocks of drhs the same way.
- group-split: splitting a group in two with the same rhs block changes no row of out or
  dlhs, nor drhs of the other groups.
- empty-group: inserting a group of size 0 (with its own rhs block, fresh data) changes no
  row of out or dlhs, the other groups' drhs, and the empty group's drhs is 0.

A sharded case (group_offset) keeps its shard: the transformed groups stay inside it, and
groups outside shift the offset.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import Arrays, cast
from kernel_harness.ops.grouped_matmul.cases import GmmCase
from kernel_harness.records.relations import Draw, Relation, Variant


def _reshaped(case: GmmCase, sizes: list[int], offset: int, local: int) -> GmmCase:
    sharded = case.group_offset is not None
    return dataclasses.replace(case, group_sizes=tuple(sizes),
                               group_offset=offset if sharded else None,
                               local_groups=local if sharded else None)


def _arrays(inputs: Arrays, case: GmmCase, **changed: np.ndarray) -> Arrays:
    out = {**inputs, **changed, "group_sizes": np.asarray(case.group_sizes, np.int32)}
    if case.group_offset is not None:
        out["group_offset"] = np.asarray(case.group_offset, np.int32).reshape(
            np.shape(inputs["group_offset"]))
    return out


def groups_permuted(case: GmmCase, inputs: Arrays, draw: Draw) -> Variant | None:
    """The shard's groups in another order, rows moved with them."""
    lo, hi = case.offset, case.offset + case.rhs_groups
    if hi - lo < 2:
        return None
    perm = list(draw(st.permutations(range(hi - lo)), label="group order"))
    if perm == sorted(perm):
        return None
    sizes = list(case.group_sizes)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    order = list(range(lo)) + [lo + p for p in perm] + list(range(hi, case.num_groups))
    rows = np.concatenate([np.arange(starts[g], starts[g + 1]) for g in order]
                          + [np.arange(starts[-1], case.m)]).astype(np.int64)
    moved = _reshaped(case, [sizes[g] for g in order], case.offset, case.rhs_groups)
    return Variant(
        case=moved,
        inputs=_arrays(inputs, moved, lhs=inputs["lhs"][rows], do=inputs["do"][rows],
                       rhs=inputs["rhs"][perm]),
        expected=lambda base: {"out": base["out"][rows], "dlhs": base["dlhs"][rows],
                               "drhs": base["drhs"][perm]},
        note=f"groups {lo}..{hi - 1} reordered as {[lo + p for p in perm]}")


def _insert(case: GmmCase, j: int) -> tuple[int, int, int | None]:
    """(offset, local groups, rhs index) after inserting a group at position ``j``:
    the rhs index of the new group, None when it lies outside the shard."""
    off, local = case.offset, case.rhs_groups
    if j < off:
        return off + 1, local, None
    if j <= off + local:
        return off, local + 1, j - off
    return off, local, None


def group_split(case: GmmCase, inputs: Arrays, draw: Draw) -> Variant | None:
    """A group of two or more rows cut in two, both halves with its rhs block."""
    big = [g for g, s in enumerate(case.group_sizes) if s >= 2]
    if not big:
        return None
    g = draw(st.sampled_from(big), label="group split")
    cut = draw(st.integers(1, case.group_sizes[g] - 1), label="rows in the first half")
    sizes = list(case.group_sizes)
    sizes[g:g + 1] = [cut, sizes[g] - cut]
    inside = case.offset <= g < case.offset + case.rhs_groups
    off, local = (case.offset, case.rhs_groups + 1) if inside else (
        (case.offset + 1, case.rhs_groups) if g < case.offset else
        (case.offset, case.rhs_groups))
    moved = _reshaped(case, sizes, off, local)
    rhs = inputs["rhs"]
    drhs_mask = np.ones(moved.rhs_groups, bool)
    if inside:
        j = g - case.offset
        rhs = np.concatenate([rhs[:j + 1], rhs[j:]])
        drhs_mask[j:j + 2] = False

    def expected(base: Arrays) -> Arrays:
        d = base["drhs"]
        if inside:  # the halves' drhs sum to the group's: not compared one by one
            d = np.concatenate([d[:j + 1], d[j:]])
        return {"out": base["out"], "dlhs": base["dlhs"], "drhs": d}

    return Variant(case=moved, inputs=_arrays(inputs, moved, rhs=rhs), expected=expected,
                   compared={"drhs": drhs_mask.reshape(-1, 1, 1)},
                   note=f"group {g} ({case.group_sizes[g]} rows) split {cut} + "
                   f"{case.group_sizes[g] - cut}")


def empty_group(case: GmmCase, inputs: Arrays, draw: Draw) -> Variant | None:
    """A group of size 0 inserted, with fresh rhs data when inside the shard."""
    j = draw(st.integers(0, case.num_groups), label="position of the empty group")
    off, local, at = _insert(case, j)
    sizes = list(case.group_sizes)
    sizes.insert(j, 0)
    moved = _reshaped(case, sizes, off, local)
    rhs = inputs["rhs"]
    if at is not None:
        fresh = np.random.default_rng(j).standard_normal(rhs.shape[1:]) * case.k ** -0.5
        rhs = np.concatenate([rhs[:at], cast(fresh, case.dtype)[None], rhs[at:]])

    def expected(base: Arrays) -> Arrays:
        d = base["drhs"]
        if at is not None:  # an empty group's drhs is 0
            d = np.concatenate([d[:at], np.zeros_like(d[:1]), d[at:]])
        return {"out": base["out"], "dlhs": base["dlhs"], "drhs": d}

    return Variant(case=moved, inputs=_arrays(inputs, moved, rhs=rhs), expected=expected,
                   note=f"empty group inserted at position {j}"
                   + ("" if at is None else f" (rhs block {at})"))


RELATIONS: tuple[Relation, ...] = (
    Relation(name="groups-permuted", doc="Permuting the groups (sizes, rhs blocks and rows) "
             "permutes out, dlhs and drhs the same way.", variant=groups_permuted,
             fraction=0.15),
    Relation(name="group-split", doc="Splitting a group in two with the same rhs block "
             "changes neither out nor dlhs nor the other groups' drhs.", variant=group_split,
             fraction=0.15),
    Relation(name="empty-group", doc="Inserting an empty group changes neither out nor dlhs "
             "nor the other groups' drhs; the empty group's drhs is 0.", variant=empty_group,
             fraction=0.15),
)
