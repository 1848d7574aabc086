"""gpu-decode's metamorphic hooks: a query row sees keys start <= j < end of its batch row."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import strategies as st

from kernel_harness.families.gpu_decode.cases import DecodeCase
from kernel_harness.ops.attention.metamorphic import as_mha_hook
from kernel_harness.spec.hooks import Metamorphic, Toggle, toggles


def block_variants(case: DecodeCase) -> st.SearchStrategy[DecodeCase]:
    """The case under every other valid tiling (block_h, block_k, k_splits, warps, stages)."""
    out = []
    for block_h in (16, 32):
        for block_k in (16, 32, 64):
            for splits in (1, 2, 4):
                try:
                    out.append(dataclasses.replace(case, block_h=block_h, block_k=block_k,
                                                   k_splits=splits, num_stages=1))
                except ValueError:
                    continue  # kv_len does not split that way
    return st.sampled_from(out)


def option_toggles(case: DecodeCase) -> list[Toggle]:
    """start/end bounds dropped (visibility), unnormalized output normalized (values)."""
    return toggles(case, ("start", case.start is not None, {"start": None}),
                   ("end", case.end is not None, {"end": None}),
                   ("unnormalized", not case.normalize_output, {"normalize_output": True},
                    "values"))


def no_keys(case: DecodeCase) -> dict[str, Any]:
    """lse = -inf for a row with no visible key (the contract)."""
    return {"lse": (case.visible().sum(axis=1) == 0)[:, None]}


METAMORPHIC = Metamorphic(
    roles={"q": ("batch", "head", "dim"), "k": ("batch", "key", "kv_head", "dim"),
           "v": ("batch", "key", "kv_head", "dim"), "out": ("batch", "head", "dim"),
           "lse": ("batch", "head")},
    visible=lambda case: case.visible()[:, None, None, :],
    block_variants=block_variants, option_toggles=option_toggles, logit_input="q",
    # Each kv head repeated for every query head of its group: the gqa entry, never mqa.
    as_mha=as_mha_hook(layout="bqhd", mha_fields=lambda case: {"entry": "gqa"}),
    may_be_nonfinite=no_keys,
)
