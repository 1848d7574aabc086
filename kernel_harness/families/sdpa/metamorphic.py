"""SDPA's hooks for the metamorphic properties and sharded runs (an XLA op: no block
sizes, no TPU interpret mode; lowering for TPU checks the XLA program only).

Visibility comes from the case description (``SdpaCase.visible``).
"""

from __future__ import annotations

import numpy as np

from kernel_harness.families.sdpa import kernel as _kernel
from kernel_harness.families.sdpa.cases import SdpaCase
from kernel_harness.ops.attention.metamorphic import as_mha_hook, shard_case, zero_cotangent
from kernel_harness.ops.attention.vocabulary import roles
from kernel_harness.spec.hooks import Metamorphic, Toggle, toggles

ROLES = roles("bqhd", q="query", k="key", v="value", bias=("batch", "head", "query", "key"),
              mask=("batch", "head", "query", "key"), q_lengths=("batch",),
              kv_lengths=("batch",))


def visible(case: SdpaCase) -> np.ndarray:
    """``[batch, heads, q_len, kv_len]``: causal, window, mask and both lengths."""
    return case.visible()


_VISIBILITY_OPTIONS = {
    "is_causal": ("causal", False), "window": ("window", None), "mask": ("mask", None),
    "kv_lengths": ("kv_lengths", None), "q_lengths": ("q_lengths", None),
}


def option_toggles(case: SdpaCase) -> list[Toggle]:
    """The case without each masking option it turns on, and without its bias."""
    return toggles(
        case, *((name, getattr(case, field) not in (None, False), {field: off})
                for field, (name, off) in _VISIBILITY_OPTIONS.items()),
        (f"bias ({case.bias})", case.bias is not None, {"bias": None}, "values"))


as_mha = as_mha_hook(layout="bqhd", kv=("key", "value"))


def constrain(case: SdpaCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The contract's zero cotangent on rows outside it (see no key, not padding)."""
    return zero_cotangent(inputs, np.transpose(case.rows_outside_contract(), (0, 2, 1))[..., None])


def local_case(case: SdpaCase, mesh: dict[str, int]) -> SdpaCase | None:
    """One shard's case: batch and heads split, the first rows' lengths standing in for the
    shard's (:func:`shard_case`)."""
    return shard_case(case, mesh, per_row=("q_lengths", "kv_lengths"))


METAMORPHIC = Metamorphic(
    roles=ROLES,
    visible=visible,
    option_toggles=option_toggles,
    as_mha=as_mha,
    logit_input="query",
    constrain=constrain,
    traceable=_kernel.traceable,
    local_case=local_case,
)
