"""How a family lays the paged-decode arrays out: the layout mapping the op's relations
read (which inputs hold pages, along which axis, and which input is the page table)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from kernel_harness.core.case import Arrays


@dataclasses.dataclass(frozen=True, kw_only=True)
class PagedLayout:
    """A family's paged arrays.

    Attributes:
      pages: ``{input: page axis}`` of every input indexed by physical page (K/V pages,
        their scales; an input absent from a case is skipped).
      slot_axis: the page-slot (token within page) axis, the same for every page input
        (the axis after the page axis in every layout here).
      table: the page-table input (int32 [rows, pages_per_seq], physical page ids).
      unseen: ``unseen(case, inputs) -> bool [total_pages, page_size]``: cache slots no
        output inside the contract may read (past every row's length, unused or spare
        pages); :func:`unseen_past_lengths` for a table of rows with lengths.
    """

    pages: Mapping[str, int]
    table: str
    unseen: Callable[[Any, Arrays], np.ndarray]

    def page_count(self, inputs: Arrays) -> int:
        """Physical pages in the cache."""
        name, axis = next((n, a) for n, a in self.pages.items() if n in inputs)
        return int(np.shape(inputs[name])[axis])

    def permuted(self, inputs: Arrays, sigma: np.ndarray) -> Arrays:
        """The same cache with physical page p moved to ``sigma[p]`` and the table
        renamed to match (a row's tokens are the same values, elsewhere in memory)."""
        inverse = np.argsort(sigma)
        out = dict(inputs)
        for name, axis in self.pages.items():
            if name in inputs:
                out[name] = np.take(inputs[name], inverse, axis=axis)
        out[self.table] = sigma[np.asarray(inputs[self.table])].astype(
            np.asarray(inputs[self.table]).dtype)
        return out

    def refilled(self, inputs: Arrays, where: np.ndarray, rng: np.random.Generator
                 ) -> Arrays:
        """Fresh finite values in the slots ``where`` [total_pages, page_size] of every
        page input: int8 pages uniform in [-127, 127], scales in [0.5, 2), floats
        standard normal times 8 (a leak of them shows)."""
        out = dict(inputs)
        for name, axis in self.pages.items():
            if name not in inputs:
                continue
            x = np.asarray(inputs[name])
            moved = np.moveaxis(x, (axis, axis + 1), (0, 1)).copy()
            shape = moved[where].shape
            if x.dtype == np.int8:
                fresh = rng.integers(-127, 128, shape)
            elif "scale" in name:
                fresh = rng.uniform(0.5, 2.0, shape)
            else:
                fresh = rng.standard_normal(shape) * 8.0
            moved[where] = fresh.astype(x.dtype)
            out[name] = np.moveaxis(moved, (0, 1), (axis, axis + 1))
        return out


def repeat_heads(inputs: Arrays, axes: Mapping[str, int], group: int) -> Arrays:
    """``inputs`` with each named array's kv-head axis repeated ``group`` times (kv head
    h becomes heads h * group .. h * group + group - 1): MHA with the kv heads repeated."""
    out = dict(inputs)
    for name, axis in axes.items():
        if name in inputs:
            out[name] = np.repeat(np.asarray(inputs[name]), group, axis=axis)
    return out


def unseen_past_lengths(table: np.ndarray, total_pages: int, page_size: int,
                        lengths: Sequence[int]) -> np.ndarray:
    """bool [total_pages, page_size]: the slots no row of ``table`` reaches with its
    tokens t < lengths[b] (spare pages, unused entries, slots past the length)."""
    seen = np.zeros((total_pages, page_size), bool)
    table = np.asarray(table)
    for b, length in enumerate(lengths):
        t = np.arange(int(length))
        seen[table[b, t // page_size], t % page_size] = True
    return ~seen


def finite_pages(layout: PagedLayout) -> Callable[[Any, Arrays], Arrays]:
    """A ``Metamorphic.constrain`` for finite-out: NaN poison in the page inputs becomes
    0 (scales 1), so every input is finite; the slots stay unseen."""

    def constrain(case: Any, inputs: Arrays) -> Arrays:
        out = dict(inputs)
        for name in layout.pages:
            x = np.asarray(inputs.get(name, np.zeros(0, np.int8)))
            if x.dtype.kind == "f" or x.dtype.name == "bfloat16":
                fill = 1.0 if "scale" in name else 0.0
                out[name] = np.where(np.isnan(x.astype(np.float32)), fill, x).astype(x.dtype)
        return out

    return constrain


def head_major(table: str, names: Sequence[str], lengths: Callable[[Any], Sequence[int]]
               ) -> tuple[PagedLayout, Callable[[Any, Arrays], tuple[Any, Arrays] | None]]:
    """The layout of caches stored ``[kv_heads, total_pages, page_size, ...]`` (every
    input in ``names``; ``table`` the page table, ``lengths(case)`` the rows' lengths) and
    its ``Metamorphic.as_mha``: the case with ``kv_heads = q_heads`` and each kv head
    repeated for every query head of its group (None for MHA)."""
    layout = PagedLayout(
        pages=dict.fromkeys(names, 1), table=table,
        unseen=lambda case, inputs: unseen_past_lengths(
            inputs[table], case.total_pages, case.page_size, lengths(case)))

    def as_mha(case: Any, inputs: Arrays) -> tuple[Any, Arrays] | None:
        if case.group == 1:
            return None
        mha = dataclasses.replace(case, kv_heads=case.q_heads)
        return mha, repeat_heads(inputs, dict.fromkeys(names, 0), case.group)

    return layout, as_mha
