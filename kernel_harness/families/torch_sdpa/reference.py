"""The ``torch-sdpa`` reference: the independent attention reference of the sdpa family
(plain jnp, float32, HIGHEST), fed in its own layout.

This module is the one place the family reaches the attention reference: repoint the import
below when the reference moves (to ``kernel_harness.ops.attention``). A float ``attn_mask``
is the reference's additive bias (after scaling), a bool one its mask; rows that see no
key give zeros there, as torch does.
"""

from __future__ import annotations

import numpy as np

from kernel_harness.families.sdpa.cases import SdpaCase
from kernel_harness.families.sdpa.reference import reference as attention_reference
from kernel_harness.families.torch_sdpa.cases import TorchSdpaCase

_BNTH_TO_BTNH = (0, 2, 1, 3)


def as_sdpa_case(case: TorchSdpaCase) -> SdpaCase:
    """The same problem in the vocabulary of the reference."""
    return SdpaCase(
        dtype=case.dtype, seed=case.seed, batch=case.batch, q_len=case.q_len,
        kv_len=case.kv_len, heads=case.heads, kv_heads=case.kv_heads, head_dim=case.head_dim,
        is_causal=case.is_causal, scale=case.scale,
        bias="full" if case.mask == "float" else None,
        mask="full" if case.mask == "bool" else None,
    )


def reference(case: TorchSdpaCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """out, dq, dk, dv in torch's layout and dmask (zeros (1, 1, 1, 1) without a float
    mask), float32."""
    x = {name: np.transpose(inputs[name], _BNTH_TO_BTNH)
         for name in ("query", "key", "value", "do")}
    if case.mask == "float":
        x["bias"] = inputs["mask"]
    elif case.mask == "bool":
        x["mask"] = inputs["mask"]
    r = attention_reference(as_sdpa_case(case), x)
    out = {name: np.transpose(r[name], _BNTH_TO_BTNH) for name in ("out", "dq", "dk", "dv")}
    out["dmask"] = r["dbias"]
    return out
