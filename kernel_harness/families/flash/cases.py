"""Cases of the TPU flash attention family (the strategy drawing them is in
:mod:`kernel_harness.families.flash.strategy`).

A :class:`FlashCase` is a readable description: shapes, ``causal``, ``sm_scale``,
whether an attention bias is present, the segment layout as ``(id, length)`` runs
per batch row, and all eleven block sizes. Arrays come from :meth:`materialize`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from kernel_harness.core.case import (
    Case,
    cast,
    check_heads,
    check_logit_scale,
    check_sizes,
    standard_normal,
)
from kernel_harness.ops.attention.events import length_events, logits_label, segment_events
from kernel_harness.ops.attention.program import Definition
from kernel_harness.ops.attention.reference import visibility
from kernel_harness.ops.attention.segments import Runs, check_pair, check_rows, stacked_ids

#: Every kv-axis block of the kernel must be a multiple of this (its softmax lane width).
KV_TILE = 128
#: q-axis blocks are drawn from multiples of this (safe sublane tiling for f32 and bf16).
Q_TILE = 32

FWD_BLOCKS = ("block_b", "block_q", "block_k_major", "block_k")
BWD_BLOCKS = (
    "block_q_major_dkv", "block_k_major_dkv", "block_k_dkv", "block_q_dkv",
    "block_k_major_dq", "block_k_dq", "block_q_dq",
)


def _divides(name: str, block: int, dim_name: str, dim: int) -> None:
    if block < 1 or dim % block:
        raise ValueError(f"{name}={block} must be positive and divide {dim_name}={dim}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class FlashCase(Case):
    """One call of ``flash_attention`` and its vjp.

    Attributes:
      batch, heads, q_len, kv_len, head_dim: shapes (q is ``(batch, heads, q_len, head_dim)``).
      causal: the kernel's causal flag (top-left aligned, see the family contract).
      sm_scale: the kernel's ``sm_scale``; ``q`` is pre-scaled so logits stay O(1).
      logit_scale: multiple of the O(1) logit scale (q is drawn so that the logits are
        ~N(0, logit_scale**2)); see :data:`~kernel_harness.core.case.LOGIT_SCALES`.
      bias: whether an attention bias ``ab`` of shape ``(batch, heads, q_len, kv_len)``
        is passed.
      q_segments, kv_segments: per batch row, ``(id, length)`` runs; both None or both set.
      block_*: the ``BlockSizes`` fields, forward and backward.
    """

    batch: int
    q_heads: int
    q_len: int
    kv_len: int
    head_dim: int
    causal: bool
    sm_scale: float
    logit_scale: float = 1.0
    bias: bool
    q_segments: tuple[Runs, ...] | None = None
    kv_segments: tuple[Runs, ...] | None = None
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

    def __post_init__(self) -> None:
        super().__post_init__()
        check_logit_scale(self.logit_scale)
        check_sizes(self, "batch", "q_len", "kv_len", "head_dim")
        check_heads(self)
        if self.head_dim > 128 and self.head_dim % 128:
            raise ValueError(f"head_dim={self.head_dim} must be <= 128 or a multiple of 128")
        if not (math.isfinite(self.sm_scale) and self.sm_scale > 0):
            raise ValueError(f"sm_scale must be positive and finite, got {self.sm_scale}")
        check_pair(self.q_segments, self.kv_segments)
        if self.q_segments is not None:
            check_rows("q_segments", self.q_segments, self.batch, self.q_len)
            check_rows("kv_segments", self.kv_segments, self.batch, self.kv_len)
        if not 1 <= self.block_b <= self.batch:
            raise ValueError(f"block_b={self.block_b} must be in [1, batch={self.batch}]")
        if not 1 <= self.block_q <= self.q_len:  # the forward q block need not divide
            raise ValueError(f"block_q={self.block_q} must be in [1, q_len={self.q_len}]")
        for q_block in ("block_q_major_dkv", "block_q_dq"):
            _divides(q_block, getattr(self, q_block), "q_len", self.q_len)
        _divides("block_q_dkv", self.block_q_dkv, "block_q_major_dkv", self.block_q_major_dkv)
        for major, minor in (
            ("block_k_major", "block_k"),
            ("block_k_major_dkv", "block_k_dkv"),
            ("block_k_major_dq", "block_k_dq"),
        ):
            _divides(major, getattr(self, major), "kv_len", self.kv_len)
            _divides(minor, getattr(self, minor), major, getattr(self, major))
            if getattr(self, minor) % KV_TILE:
                raise ValueError(f"{minor}={getattr(self, minor)} must be a multiple of {KV_TILE}")

    def shape_summary(self) -> str:
        """``q=(2,2,256,64) kv=512 causal seg bias sm_scale=0.125``."""
        flags = [
            "causal" if self.causal else "",
            "seg" if self.q_segments is not None else "",
            "bias" if self.bias else "",
        ]
        return " ".join(
            [f"q=({self.batch},{self.q_heads},{self.q_len},{self.head_dim}) kv={self.kv_len}"]
            + [f for f in flags if f]
            + [f"sm_scale={self.sm_scale:g}"]
        )

    def static_key(self) -> tuple[object, ...]:
        """What selects a compiled program: shapes, dtype, flags, block sizes (not the
        data, not the segment layout)."""
        return (
            self.dtype, self.batch, self.q_heads, self.q_len, self.kv_len, self.head_dim,
            self.causal, self.sm_scale, self.bias, self.q_segments is not None,
            tuple(sorted(self.block_sizes.items())),
        )

    @property
    def block_sizes(self) -> dict[str, int]:
        """The eleven ``BlockSizes`` fields by name."""
        return {name: getattr(self, name) for name in FWD_BLOCKS + BWD_BLOCKS}

    def segment_arrays(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(q ids (batch, q_len), kv ids (batch, kv_len))`` int32, or None."""
        if self.q_segments is None:
            return None
        return stacked_ids(self.q_segments), stacked_ids(self.kv_segments)

    def visible(self) -> np.ndarray:
        """``(batch, q_len, kv_len)`` bool: key j visible to query i (from the description,
        by the attention op's dense-mask builder)."""
        vis = visibility(self.q_len, self.kv_len, causal=self.causal,
                         segments=self.segment_arrays(), xp=np)[:, 0]
        return np.array(np.broadcast_to(vis, (self.batch, self.q_len, self.kv_len)))

    def rows_without_keys(self) -> np.ndarray:
        """``(batch, q_len)`` bool: query rows that see no key at all."""
        return ~self.visible().any(axis=-1)

    def materialize(self) -> dict[str, np.ndarray]:
        """q, k, v, do (``do`` zero on rows that see no key), ab if ``bias``, and
        ``segment_ids_q``/``segment_ids_kv`` if segmented."""
        rng = self.rng()
        b, h, d = self.batch, self.q_heads, self.head_dim
        # sm_scale * q.k ~ N(0, logit_scale**2) whatever sm_scale is (at 1x softmax is
        # neither flat nor one-hot; at 16x nearly one-hot, for the max-subtraction paths).
        q_scale = self.logit_scale / (math.sqrt(d) * self.sm_scale)
        out = {
            "q": cast(rng.standard_normal((b, h, self.q_len, d)) * q_scale, self.dtype),
            "k": standard_normal(rng, (b, h, self.kv_len, d), self.dtype),
            "v": standard_normal(rng, (b, h, self.kv_len, d), self.dtype),
        }
        do = rng.standard_normal((b, h, self.q_len, d))
        # Rows outside the contract must not leak into dk/dv through the cotangent.
        do[np.broadcast_to(self.rows_without_keys()[:, None, :], do.shape[:3])] = 0.0
        out["do"] = cast(do, self.dtype)
        if self.bias:
            ab = rng.standard_normal((b, h, self.q_len, self.kv_len)) / self.sm_scale
            out["ab"] = cast(ab, self.dtype)
        segs = self.segment_arrays()
        if segs is not None:
            out["segment_ids_q"], out["segment_ids_kv"] = segs
        return out


def flash_events(case: FlashCase) -> list[str]:
    """Coverage labels of a case (what paths of the kernel it reaches)."""
    ev = [case.dtype, "causal" if case.causal else "non-causal"]
    if case.bias:
        ev.append("bias")
    if case.sm_scale != 1.0:
        ev.append("sm-scale")
    if case.q_segments is not None:
        ev += ["segments", *segment_events(case.q_segments, case.kv_segments)]
    if case.block_k == case.kv_len:
        ev.append("fwd-single-tile")
    else:
        if case.block_k_major < case.kv_len:
            ev.append("fwd-multi-kv-block")
        if case.block_k < case.block_k_major:
            ev.append("fwd-kv-subtiles")
    if case.q_len > case.block_q:
        ev.append("multi-q-block")
    if case.q_len % case.block_q:
        ev.append("ragged-q-block")
    if case.batch > 1:
        ev.append("batch>1")
    if case.q_heads > 1:
        ev.append("heads>1")
    if case.block_b > 1:
        ev.append("block_b>1")
    if case.block_b < case.batch:
        ev.append("block_b<batch")
    if case.batch % case.block_b:
        ev.append("partial-batch-block")
    if case.q_len != case.kv_len:
        ev += length_events(case.q_len, case.kv_len)
    if case.block_q_dkv < case.block_q_major_dkv or case.block_k_dkv < case.block_k_major_dkv:
        ev.append("dkv-subtiles")
    if case.block_k_dq < case.block_k_major_dq:
        ev.append("dq-subtiles")
    if case.kv_len // case.block_k_major_dkv > 1 and case.q_len // case.block_q_major_dkv > 1:
        ev.append("dkv-multi-block")
    if case.kv_len // case.block_k_major_dq > 1 and case.q_len // case.block_q_dq > 1:
        ev.append("dq-multi-block")
    if case.rows_without_keys().any():
        ev.append("rows-without-keys")
    ev.append(logits_label(case.logit_scale))
    return ev


def attention_definition(case: FlashCase) -> Definition:
    """Flash's softmax in the attention op's options: ``(q.k^T + ab) * sm_scale`` (the bias
    added before scaling), and the magnitudes of the terms summed into dq and dk: the
    backward takes ``D = rowsum(dO * O)`` from its own rounded output, so a row whose
    ``dP - D`` cancels carries the rounding of ``D``, not of its own small value (a bfloat16
    row seeing two keys: 4x the plain bfloat16 math's error, all of it from ``D``)."""
    return Definition(layout="bhqd", scale=case.sm_scale, bias_before_scale=True,
                    magnitudes=("dq", "dk"))
