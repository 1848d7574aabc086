"""What a ragged paged attention family's ``Family`` record takes from the op, written once:
the one padding exclusion (:func:`padding_excluded`, :func:`exclusion`) and the record
fields every ragged kernel, every kernel of the passes and every kernel updating a K/V
cache restate otherwise (:func:`ragged_record`, :func:`passes_record`,
:func:`kv_update_record`). A family gives its kernel's own exclusions (slots its kernel
may leave), capabilities it lacks or adds and the modes of its own knobs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from kernel_harness.ops.attention.metamorphic import inside
from kernel_harness.ops.paged_attention.kv_update import OUTPUT_AXES, kv_update_reference
from kernel_harness.ops.paged_attention.passes import PASSES_MODES
from kernel_harness.ops.paged_attention.ragged import CAPABILITIES
from kernel_harness.ops.paged_attention.sequences import RaggedBatch

#: ``case -> {output: mask}``, true where the contract does not hold (a ``may_be_nonfinite``
#: hook).
Exclusion = Callable[[Any], Mapping[str, np.ndarray]]


def padding_excluded(case: RaggedBatch, *, output: str = "out", token_axis: int = 0
                     ) -> dict[str, np.ndarray]:
    """The op's padding: ``output``'s query tokens at or past the active sequences' (rows
    :meth:`~.sequences.RaggedBatch.token_rows` leaves out, along ``token_axis`` of a 3-D
    output) are outside the contract; nothing when there are none."""
    rows = ~case.token_rows()
    if not rows.any():
        return {}
    shape = [1, 1, 1]
    shape[token_axis] = rows.size
    return {output: rows.reshape(shape)}


def exclusion(*, output: str = "out", token_axis: int = 0, kernel: Exclusion | None = None
              ) -> Exclusion:
    """``case -> masks`` outside the contract: the op's padding (:func:`padding_excluded`)
    and, where a family names them, its kernel's own (``kernel(case)``, the same
    polarity: slots the kernel may leave), or-ed where both name an output."""
    def excluded(case: RaggedBatch) -> dict[str, np.ndarray]:
        masks = padding_excluded(case, output=output, token_axis=token_axis)
        for name, mask in (kernel(case) if kernel is not None else {}).items():
            masks[name] = masks[name] | mask if name in masks else mask
        return masks

    return excluded


def ragged_record(excluded: Exclusion | None = None, *,
                  capabilities: frozenset[str] = CAPABILITIES) -> dict[str, Any]:
    """``Family`` fields of a ragged paged attention kernel: the op's capabilities (a
    family passes its own set where its kernel lacks or adds one) and ``valid`` as the
    complement of ``excluded`` (default: the op's padding of ``out`` [tokens, ...])."""
    return dict(capabilities=capabilities, valid=inside(excluded or exclusion()))


def passes_record(*, modes: frozenset[str] | set[str], excluded: Exclusion | None = None,
                  capabilities: frozenset[str] = CAPABILITIES) -> dict[str, Any]:
    """:func:`ragged_record` of a kernel of the passes, with the modes its cases reach:
    the passes' (:data:`~.passes.PASSES_MODES`) and ``modes``, its own knobs'."""
    return {**ragged_record(excluded, capabilities=capabilities),
            "modes": PASSES_MODES | frozenset(modes)}


def kv_update_record(*, modes: frozenset[str] | set[str], excluded: Exclusion | None = None,
                     capabilities: frozenset[str] = CAPABILITIES) -> dict[str, Any]:
    """:func:`passes_record` of a kernel that writes the new tokens' K/V into its cache
    first (:mod:`.kv_update`): the op's reference over the updated cache and its output
    axes too."""
    return {**passes_record(modes=modes, excluded=excluded, capabilities=capabilities),
            "reference": kv_update_reference, "output_axes": OUTPUT_AXES}
