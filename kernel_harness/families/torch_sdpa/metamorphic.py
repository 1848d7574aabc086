"""torch-sdpa's hooks for the metamorphic properties (torch's layout, batch-heads-seq-dim).

Visibility comes from the case description (``TorchSdpaCase.visible``: causal and a bool
mask); a float mask changes values, not visibility. A row that sees no key is inside the
contract (torch gives exactly 0 there), so nothing is excluded and no cotangent zeroed.
No TPU lowering and no sharded runs (torch runs through a host callback).
"""

from __future__ import annotations

import numpy as np

from kernel_harness.families.torch_sdpa.cases import TorchSdpaCase
from kernel_harness.ops.attention.metamorphic import as_mha_hook
from kernel_harness.ops.attention.vocabulary import roles
from kernel_harness.spec.hooks import Metamorphic, Toggle, toggles

ROLES = roles("bhqd", q="query", k="key", v="value", mask=("batch", "head", "query", "key"))


def visible(case: TorchSdpaCase) -> np.ndarray:
    """``[batch, heads, q_len, kv_len]``: causal and a bool mask."""
    return case.visible()


def option_toggles(case: TorchSdpaCase) -> list[Toggle]:
    """The case without is_causal, without its bool mask (visibility), without its float
    mask (values)."""
    return toggles(case, ("is_causal", case.is_causal, {"is_causal": False}),
                   ("bool attn_mask", case.mask == "bool", {"mask": None, "empty_row": False}),
                   ("float attn_mask", case.mask == "float", {"mask": None}, "values"))


METAMORPHIC = Metamorphic(
    roles=ROLES,
    visible=visible,
    option_toggles=option_toggles,
    as_mha=as_mha_hook(layout="bhqd", kv=("key", "value")),
    logit_input="query",
)
