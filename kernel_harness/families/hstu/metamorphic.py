"""HSTU's hooks for the metamorphic properties, TPU lowering and sharded runs.

Visibility comes from the family's own dense mask (``masks.dense_mask``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.backends import Backend
from kernel_harness.kernels.hstu.api import hstu_attention
from kernel_harness.ops.attention.metamorphic import lane_block_variants, shard_case
from kernel_harness.ops.attention.vocabulary import roles
from kernel_harness.ops.pointwise_attention.cases import (
    BLOCK_FIELDS,
    LANES,
    HstuCase,
    expand_runs,
    numpy_mask,
)
from kernel_harness.ops.pointwise_attention.masks import dense_mask
from kernel_harness.records.hooks import Metamorphic, Toggle, toggles

ROLES = roles("bqhd", kv_head="head", mask=("query", "key"), q_segment_ids=("batch", "query"),
              kv_segment_ids=("batch", "key"))


def segments(case: HstuCase) -> tuple[np.ndarray, np.ndarray] | None:
    """``[batch, q_len]`` and ``[batch, kv_len]`` segment ids, or None."""
    if case.q_segments is None:
        return None
    return expand_runs(case.q_segments, case.batch), expand_runs(case.kv_segments, case.batch)


def visible(case: HstuCase) -> np.ndarray:
    """``[batch, 1, q_len, kv_len]``: mask AND window AND segments."""
    segs = segments(case)
    mask = dense_mask(
        case.mask, case.q_len, case.kv_len, window=case.window,
        numpy_mask=numpy_mask(case) if case.mask == "numpy" else None,
        q_segment_ids=None if segs is None else segs[0],
        kv_segment_ids=None if segs is None else segs[1], batch=case.batch,
    )
    return mask[:, None]


def block_variants(case: HstuCase) -> st.SearchStrategy[HstuCase]:
    """The same case with independently redrawn forward and backward blocks."""
    return lane_block_variants(case, LANES)


def option_toggles(case: HstuCase) -> list[Toggle]:
    """The case without its causal/numpy mask, its window, its segments."""
    return toggles(
        case, (f"mask {case.mask}", case.mask != "full",
               {"mask": "full", "mask_pattern": None, "mask_density": None, "mask_seed": None}),
        (f"window {case.window}", case.window is not None, {"window": None}),
        ("segment ids", case.q_segments is not None, {"q_segments": None, "kv_segments": None}))


def traceable(impl: Callable[..., Any] | None, case: HstuCase, backend: Backend
              ) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Forward + vjp of ``impl`` as ``f(inputs) -> outputs``; the numpy mask is static
    (the kernel plans its block tables from it on the host), so it comes from the case."""
    impl = impl or hstu_attention
    mask_type = numpy_mask(case) if case.mask == "numpy" else case.mask
    kwargs = {name: getattr(case, name) for name in BLOCK_FIELDS}
    kwargs.update(sliding_window_size=case.window, scale=case.scale,
                  interpret=backend.pallas_interpret())

    def f(inputs: dict[str, Any]) -> dict[str, Any]:
        segs = {n: inputs[n] for n in ("q_segment_ids", "kv_segment_ids") if n in inputs}

        def attend(q, k, v):
            return impl(mask_type, q, k, v, **segs, **kwargs)

        out, vjp = jax.vjp(attend, inputs["q"], inputs["k"], inputs["v"])
        dq, dk, dv = vjp(inputs["do"].astype(out.dtype))
        return {"out": out, "dq": dq, "dk": dk, "dv": dv}

    return f


METAMORPHIC = Metamorphic(
    roles=ROLES,
    visible=visible,
    segments=segments,
    block_variants=block_variants,
    option_toggles=option_toggles,
    traceable=traceable,
    # Batch and heads split; segment ids are traced operands, so each shard's rows keep
    # their own ids.
    local_case=shard_case,
)
