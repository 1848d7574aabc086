"""Splash's hooks for the metamorphic properties, TPU lowering and sharded runs.

Visibility comes from the family's own dense mask (``reference.allowed_mask``),
never from splash's mask objects.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from kernel_harness.families.splash import kernel as _kernel
from kernel_harness.families.splash.cases import LANES, SplashCase
from kernel_harness.families.splash.masks import allowed_mask, empty_rows
from kernel_harness.ops.attention.metamorphic import (
    as_mha_hook,
    lane_block_variants,
    shard_case,
    zero_cotangent,
)
from kernel_harness.ops.attention.segments import segment_ids
from kernel_harness.ops.attention.vocabulary import roles
from kernel_harness.spec.hooks import Metamorphic, Toggle, toggles

ROLES = roles("bhqd", sinks=("head",), q_segment_ids=("query",), kv_segment_ids=("key",))


def visible(case: SplashCase) -> np.ndarray:
    """[1, heads, q_len, kv_len]: mask and segment ids together."""
    return allowed_mask(case)[None]


def segments(case: SplashCase) -> tuple[np.ndarray, np.ndarray] | None:
    """The q and kv segment ids ([1, len] each), or None."""
    if case.q_segments is None:
        return None
    return segment_ids(case.q_segments)[None], segment_ids(case.kv_segments)[None]


def block_variants(case: SplashCase, *, fused_only: bool = False
                   ) -> st.SearchStrategy[SplashCase]:
    """The same case with independently redrawn block sizes and fused/split backward
    (shrinks towards the smallest blocks and the split backward; ``fused_only``: the
    fused backward always, for an implementation without the split one)."""
    return lane_block_variants(case, LANES, split_backward="never" if fused_only else "drawn")


def option_toggles(case: SplashCase) -> list[Toggle]:
    """The case without each option it turns on: its masks, segments, soft cap, sinks."""
    return toggles(
        case, (f"mask {' / '.join(sorted(set(case.masks)))}",
               any(m != "full" for m in case.head_masks()), {"masks": ("full",)}),
        ("segment ids", case.q_segments is not None, {"q_segments": None, "kv_segments": None}),
        (f"soft cap {case.soft_cap}", case.soft_cap is not None, {"soft_cap": None}, "values"),
        ("sinks", case.sinks and not empty_rows(case).any(), {"sinks": False}, "values"))


as_mha = as_mha_hook(layout="bhqd", mha_fields=lambda case: {"mqa": False})


def may_be_nonfinite(case: SplashCase) -> dict[str, np.ndarray]:
    """Without sinks, out and lse of rows that see no key are outside the contract."""
    if case.sinks:
        return {}
    rows = empty_rows(case)
    return {"out": rows[None, :, :, None], "lse": rows[None]}


def constrain(case: SplashCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The contract's zero cotangent on rows that see no key (without sinks)."""
    if case.sinks:
        return inputs
    return zero_cotangent(inputs, empty_rows(case)[None, :, :, None])


def local_case(case: SplashCase, mesh: dict[str, int]) -> SplashCase | None:
    """One shard's case (:func:`shard_case`): batch split always; heads only when every
    head has the same mask (one kernel serves all local heads, so per-head masks cannot be
    split)."""
    if mesh.get("head", 1) > 1 and len(set(case.head_masks())) > 1:
        return None
    return shard_case(case, mesh)


METAMORPHIC = Metamorphic(
    roles=ROLES,
    visible=visible,
    segments=segments,
    block_variants=block_variants,
    option_toggles=option_toggles,
    as_mha=as_mha,
    logit_input="q",
    may_be_nonfinite=may_be_nonfinite,
    constrain=constrain,
    traceable=_kernel.traceable,
    local_case=local_case,
)
