"""The flash family's case: the attention problem (:class:`~kernel_harness.ops.attention.
problem.AttentionProblem`) as TPU ``flash_attention`` takes it, and its eleven block sizes.

q, k, v are ``(batch, heads, len, head_dim)`` (no GQA), the bias ``ab`` full
``(batch, heads, q_len, kv_len)`` and added BEFORE scaling, segment ids per batch row; a
row that sees no key (through segment ids) is outside the contract.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kernel_harness.families.flash.blocks import BLOCKS, check_blocks
from kernel_harness.ops.attention.features import Features
from kernel_harness.ops.attention.problem import AttentionProblem


@dataclasses.dataclass(frozen=True, kw_only=True)
class FlashCase(AttentionProblem):
    """One call of ``flash_attention`` and its vjp: the attention problem and the
    ``BlockSizes`` fields, forward and backward (``sm_scale`` is the case's
    ``effective_scale``)."""

    block_b: int
    block_q: int
    block_k_major: int
    block_k: int
    block_q_major_dkv: int
    block_k_major_dkv: int
    block_k_dkv: int
    block_q_dkv: int
    block_k_major_dq: int
    block_k_dq: int
    block_q_dq: int

    FEATURES = Features(
        layout="bhqd",
        names={"q": "q", "k": "k", "v": "v", "do": "do", "bias": "ab",
               "segment_ids_q": "segment_ids_q", "segment_ids_kv": "segment_ids_kv"},
        outputs={"dbias": "dab"},
        optional=frozenset({"causal", "segments", "bias", "scale", "q-len-ne-kv-len"}),
        broadcasts=("full",),
        # The backward takes D = rowsum(dO * O) from its own rounded output, so a row whose
        # dP - D cancels carries the rounding of D, not of its own small value (a bfloat16
        # row seeing two keys: 4x the plain bfloat16 math's error, all of it from D).
        magnitudes=("dq", "dk"),
        bias_before_scale=True,
        absent_dbias="full",
        calibrated=frozenset({"bfloat16"}),
        lengths=(256, 512, 384, 128),  # kv blocks are multiples of 128
        q_only_lengths=(64, 192),
        head_dims=(64, 128, 32),
        max_batch_heads=4,  # bounds interpret time
        # sm_scale == 1.0 (the kernel's default) skips its scaling code: drawn too.
        scales=(1.0, 0.5),
        unit_scale=True,
        # Its bfloat16 twin rounds where the kernel does (P, D from its rounded output, dS
        # once): the plain twin never rounds O before D, and a pristine dab erred up to 2.9x
        # its error (docs/judge.md, "Calibrated bounds").
        precision_design="jax-flash",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.head_dim > 128 and self.head_dim % 128:
            raise ValueError(f"head_dim={self.head_dim} must be <= 128 or a multiple of 128")
        check_blocks(self)

    def definition_options(self) -> dict[str, Any]:
        """The forward's key step ``block_k`` (the jax-flash design's ``kv_block``): with
        ``block_k == kv_len`` it takes every key at once and rounds the normalised
        probabilities; a smaller one runs an online softmax."""
        return {"kv_block": self.block_k}

    @classmethod
    def upgraded(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Cases stored before flash was on the attention problem: ``causal`` is
        ``is_causal``, ``sm_scale`` the explicit ``scale``, ``bias: true`` a full bias
        (``false``: none), and ``kv_heads`` the query heads (no GQA)."""
        out = dict(data)
        for old, new in (("causal", "is_causal"), ("sm_scale", "scale")):
            if old in out:
                out[new] = out.pop(old)
        if isinstance(out.get("bias"), bool):
            out["bias"] = "full" if out["bias"] else None
        if "q_heads" in out and "kv_heads" not in out:
            out["kv_heads"] = out["q_heads"]
        return out

    @property
    def block_sizes(self) -> dict[str, int]:
        """The eleven ``BlockSizes`` fields by name."""
        return {name: getattr(self, name) for name in BLOCKS}
