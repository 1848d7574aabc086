"""The torch-sdpa family's case: the attention problem (:class:`~kernel_harness.ops.
attention.problem.AttentionProblem`) as ``torch.nn.functional.scaled_dot_product_attention``
takes it, and the torch kernel pinned for the call.

``query`` is ``(batch, heads, q_len, head_dim)``, key/value ``(batch, kv_heads, kv_len,
head_dim)``. torch's one ``attn_mask`` argument (input ``mask``) is the problem's boolean
mask (True = attend) or its additive bias, full ``(batch, heads, q_len, kv_len)``; torch
refuses it together with ``is_causal``, so a case has at most one of the three. A row that
sees no key gives exactly zero (inside the contract).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import strategies as st

from kernel_harness.ops.attention.features import Features
from kernel_harness.ops.attention.problem import AttentionProblem

#: torch's SDPA kernels a case can pin (``torch.nn.attention.SDPBackend`` names, lowercase).
SDPA_KERNELS = ("math", "flash")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TorchSdpaCase(AttentionProblem):
    """One SDPA call and its backward (``enable_gqa`` is passed as ``kv_heads !=
    q_heads``).

    Attributes:
      backend: the SDPA kernel pinned by ``sdpa_kernel`` (:data:`SDPA_KERNELS`).
    """

    backend: str = "math"

    FEATURES = Features(
        layout="bhqd",
        names={"q": "query", "k": "key", "v": "value", "do": "do", "bias": "mask",
               "mask": "mask"},
        outputs={"dbias": "dmask"},
        optional=frozenset({"bias", "mask", "causal", "scale", "gqa", "q-len-ne-kv-len",
                            "unaligned-lengths", "bias-gradient"}),
        broadcasts=("full",),
        exclusive=(frozenset({"causal", "mask", "bias"}),),
        empty_rows="zero",
        max_batch=2,
        lengths=(16, 32, 8, 40, 64),
        head_dims=(32, 16, 64),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.backend not in SDPA_KERNELS:
            raise ValueError(f"backend must be one of {SDPA_KERNELS}, got {self.backend!r}")

    @classmethod
    def upgraded(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Cases stored before the attention problem spelled torch's ``attn_mask`` as
        ``mask="bool"`` / ``mask="float"``: the problem's full mask / full bias."""
        out = dict(data)
        if out.get("mask") == "bool":
            out["mask"] = "full"
        elif out.get("mask") == "float":
            out["mask"], out["bias"] = None, "full"
        return out

    @property
    def enable_gqa(self) -> bool:
        """torch's ``enable_gqa``: fewer kv heads than query heads."""
        return self.kv_heads != self.q_heads


def config(problem: AttentionProblem) -> st.SearchStrategy[dict[str, Any]]:
    """The pinned torch kernel."""
    del problem
    return st.fixed_dictionaries({"backend": st.sampled_from(SDPA_KERNELS)})


def config_events(case: TorchSdpaCase) -> list[str]:
    """``kernel-math`` / ``kernel-flash``."""
    return [f"kernel-{case.backend}"]


def torch_sdpa_seed_cases(without: frozenset[str] = frozenset()) -> list[TorchSdpaCase]:
    """Hand-made cases every run tries first (``Family.seed_cases``): the derandomized ci
    profile's 30 draws reached no bool mask and one q_len < kv_len case. A mask with a row
    that sees no key on each kernel, a bias (its gradient, math), causal with q_len <
    kv_len (top-left) under GQA; those using a feature in ``without`` are left out."""
    base = dict(seed=11, batch=1, q_heads=4, kv_heads=2, head_dim=16)
    cases = [
        TorchSdpaCase(dtype="float32", q_len=8, kv_len=16, mask="full", empty_row=True,
                      mask_keep=0.5, backend="math", **base),
        TorchSdpaCase(dtype="bfloat16", q_len=16, kv_len=16, mask="full", empty_row=True,
                      backend="flash", **base),
        TorchSdpaCase(dtype="float32", q_len=16, kv_len=8, bias="full", scale=0.2,
                      backend="math", **base),
        TorchSdpaCase(dtype="float32", q_len=8, kv_len=32, is_causal=True, backend="flash",
                      **base),
    ]
    if without & {"gqa", "unaligned-lengths"}:  # every seed case has both
        return []
    return [c for c in cases if not TorchSdpaCase.FEATURES.used(c) & without
            and not ("q-len-ne-kv-len" in without and c.q_len != c.kv_len)]
