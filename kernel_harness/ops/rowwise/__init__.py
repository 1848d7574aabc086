"""The row-wise op: an op applied to each row of ``[rows, width]`` inputs, tiled over
rows (rotary embeddings, activations, gated products, row scalings), with per-row tables
beside the data. Its case vocabulary (:mod:`.cases`) and a family record built from a
few declarations (:mod:`.family`): the generic pieces a user's new op starts from
(docs/extending.md)."""

from kernel_harness.ops.rowwise.cases import (
    Operand,
    RowwiseCase,
    half,
    rowwise_cases,
    rowwise_events,
    same_width,
)
from kernel_harness.ops.rowwise.family import default_tolerances, rowwise_family

__all__ = ["Operand", "RowwiseCase", "default_tolerances", "half", "rowwise_cases",
           "rowwise_events", "rowwise_family", "same_width"]
