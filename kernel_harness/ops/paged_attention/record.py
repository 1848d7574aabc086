"""What every paged decode family's ``Family`` record takes from the op, written once."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from kernel_harness.ops.attention.metamorphic import inside
from kernel_harness.ops.paged_attention.reference import PagedCall, references
from kernel_harness.ops.paged_attention.strategy import OUTPUT_AXES, PAGED_CAPABILITIES


def paged_record(call_of: Callable[[Any, dict[str, np.ndarray]], PagedCall],
                 excluded: Callable[[Any], Mapping[str, np.ndarray]]) -> dict[str, Any]:
    """``Family`` fields of a paged decode kernel whose cases map onto the op by
    ``call_of(case, inputs)`` and whose contract leaves out ``excluded(case)`` (its
    ``may_be_nonfinite`` hook): the op's reference and low-precision twin over the call, the
    op's output axes and capabilities, and ``valid`` as the complement of ``excluded``."""
    reference, low_precision_reference = references(call_of)
    return dict(reference=reference, low_precision_reference=low_precision_reference,
                output_axes=OUTPUT_AXES, capabilities=PAGED_CAPABILITIES,
                valid=inside(excluded))
