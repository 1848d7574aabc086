"""ops.paged_attention.record: what a paged decode family's record takes from the op."""

from __future__ import annotations

import numpy as np

from kernel_harness.families.gpu_paged.cases import PagedCase
from kernel_harness.families.gpu_paged.family import FAMILY
from kernel_harness.ops.paged_attention.record import paged_record
from kernel_harness.ops.paged_attention.strategy import OUTPUT_AXES, PAGED_CAPABILITIES


def test_the_op_gives_reference_axes_capabilities_and_valid() -> None:
    fields = paged_record(lambda case, inputs: None,
                          lambda case: {"out": np.array([[True], [False]])})
    assert set(fields) == {"reference", "low_precision_reference", "output_axes",
                           "capabilities", "valid"}
    assert fields["output_axes"] == OUTPUT_AXES and fields["capabilities"] == PAGED_CAPABILITIES
    assert fields["valid"](None)["out"].tolist() == [[False], [True]]  # the complement


def test_a_family_record_is_judged_by_the_ops_reference() -> None:
    case = PagedCase(dtype="float32", seed=0, batch=1, q_heads=2, kv_heads=1, head_dim=16,
                     page_size=16, pages_per_seq=2, lengths=(20,))
    out = FAMILY.reference(case, case.materialize())["out"]
    assert out.shape == (1, 2, 16) and np.isfinite(out).all()
    assert FAMILY.reference is not None and FAMILY.low_precision_reference is not None
