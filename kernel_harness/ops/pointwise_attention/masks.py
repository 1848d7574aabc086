"""The pointwise-attention op's masks as dense arrays: ``kind`` (causal, full, numpy), a
symmetric window and segment ids, each built by the attention op's one dense-mask builder
(:func:`kernel_harness.ops.attention.reference.visibility`) from the case description;
nothing comes from the kernel package."""

from __future__ import annotations

import numpy as np

from kernel_harness.ops.attention.reference import visibility
from kernel_harness.ops.pointwise_attention.cases import HstuCase


def dense_mask(
    kind: str,
    q_len: int,
    kv_len: int,
    *,
    window: int | None = None,
    numpy_mask: np.ndarray | None = None,
    q_segment_ids: np.ndarray | None = None,
    kv_segment_ids: np.ndarray | None = None,
    batch: int = 1,
) -> np.ndarray:
    """The ``[batch, q_len, kv_len]`` bool mask: which key each query sees.

    ``kind`` is ``causal`` (key j <= query i, indices from 0 in both
    sequences whatever their lengths), ``full`` or ``numpy`` (``numpy_mask``);
    a window keeps ``|i - j| <= window``; segment ids keep equal ids.
    """
    if kind not in ("causal", "full", "numpy"):
        raise ValueError(f"unknown mask kind {kind!r}")
    segments = None if q_segment_ids is None else (q_segment_ids, kv_segment_ids)
    vis = visibility(q_len, kv_len, causal=kind == "causal",
                     mask=numpy_mask if kind == "numpy" else None,
                     window=None if window is None else (window, window),
                     segments=segments, xp=np)[:, 0]
    return np.array(np.broadcast_to(vis, (batch, q_len, kv_len)))


def case_mask(case: HstuCase, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """:func:`dense_mask` for one case (the numpy mask and segment ids from its inputs)."""
    return dense_mask(
        case.mask, case.q_len, case.kv_len, window=case.window,
        numpy_mask=inputs.get("mask"), q_segment_ids=inputs.get("q_segment_ids"),
        kv_segment_ids=inputs.get("kv_segment_ids"), batch=case.batch,
    )
