"""Splash attention cases: the frozen, readable description of one example.

Masks are strings in the mask language of :mod:`kernel_harness.ops.attention.masks`
(one per head or one shared by all heads); segments are run-length tuples of
``(segment id, run length)``. The strategy drawing cases is in
:mod:`kernel_harness.families.splash.strategy`.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from kernel_harness.core.case import (
    Case,
    cast,
    check_heads,
    check_logit_scale,
    check_sizes,
    standard_normal,
)
from kernel_harness.families.splash.masks import empty_rows
from kernel_harness.ops.attention.masks import parse_mask
from kernel_harness.ops.attention.program import Definition
from kernel_harness.ops.attention.segments import Runs, check_pair, check_runs, segment_ids

#: Sequence lengths the strategy draws (multiples of the kernel's 128 lanes).
SEQ_LENS: tuple[int, ...] = (128, 256, 384, 512)
#: Block sizes must be multiples of this (the kernel's lane count).
LANES = 128
LAYOUTS: tuple[str, ...] = ("head_dim_minor", "seq_minor")
DTYPES: tuple[str, ...] = ("float32", "bfloat16")
HEAD_DIMS: tuple[int, ...] = (64, 128, 256)

@dataclasses.dataclass(frozen=True, kw_only=True)
class SplashCase(Case):
    """One splash attention problem, described (not stored as arrays).

    Attributes:
      batch: examples, run through ``jax.vmap`` of the per-example kernel.
      q_heads, kv_heads: query and key/value heads; ``kv_heads``
        divides ``q_heads`` (equal: MHA, fewer: grouped). MQA has 1.
      mqa: use ``make_splash_mqa`` (k/v carry no head axis); needs kv_heads 1.
      q_len, kv_len: sequence lengths (multiples of 128).
      head_dim, head_dim_v: q/k and v head sizes.
      masks: one mask string shared by all heads, or one per query head.
      q_segments, kv_segments: run-length segment ids, both or neither.
      soft_cap: logits soft cap (``cap * tanh(logits / cap)``) or None.
      sinks: one learned sink logit per query head.
      logit_scale: multiple of the O(1) logit scale (q is drawn so that the logits are
        ~N(0, logit_scale**2)); see :data:`~kernel_harness.core.case.LOGIT_SCALES`.
      block_*: the kernel's BlockSizes; ``block_q_dq``/``block_kv_dq`` are None
        exactly when ``fused_bwd`` (the fused dq+dkv backward kernel).
      q_layout, k_layout, v_layout: ``head_dim_minor`` or ``seq_minor``.
    """

    batch: int = 1
    q_heads: int = 1
    kv_heads: int = 1
    mqa: bool = False
    q_len: int = 128
    kv_len: int = 128
    head_dim: int = 128
    head_dim_v: int = 128
    masks: tuple[str, ...] = ("full",)
    q_segments: Runs | None = None
    kv_segments: Runs | None = None
    soft_cap: float | None = None
    sinks: bool = False
    logit_scale: float = 1.0
    block_q: int = 128
    block_kv: int = 128
    block_kv_compute: int = 128
    block_q_dkv: int = 128
    block_kv_dkv: int = 128
    block_kv_dkv_compute: int = 128
    block_q_dq: int | None = 128
    block_kv_dq: int | None = 128
    fused_bwd: bool = False
    q_layout: str = "head_dim_minor"
    k_layout: str = "head_dim_minor"
    v_layout: str = "head_dim_minor"

    DYNAMIC_FIELDS: ClassVar[frozenset[str]] = frozenset({"seed", "logit_scale"})

    def __post_init__(self) -> None:
        super().__post_init__()
        check_logit_scale(self.logit_scale)
        if self.dtype not in DTYPES:
            raise ValueError(f"splash runs {DTYPES}, not {self.dtype!r}")
        check_sizes(self, "batch")
        check_heads(self)
        if self.mqa and self.kv_heads != 1:
            raise ValueError("mqa=True needs kv_heads=1")
        for name in ("q_len", "kv_len"):
            n = getattr(self, name)
            if n < LANES or n % LANES:
                raise ValueError(f"{name}={n} must be a positive multiple of {LANES}")
        for name in ("head_dim", "head_dim_v"):
            if getattr(self, name) not in HEAD_DIMS:
                raise ValueError(f"{name} must be one of {HEAD_DIMS}")
        if len(self.masks) not in (1, self.q_heads):
            raise ValueError(
                f"masks: give 1 or q_heads={self.q_heads} specs, got {len(self.masks)}"
            )
        for spec in self.masks:
            parse_mask(spec)
        self._check_segments()
        if self.soft_cap is not None and not self.soft_cap > 0:
            raise ValueError("soft_cap must be > 0 or None")
        self._check_blocks()
        for name in ("q_layout", "k_layout", "v_layout"):
            if getattr(self, name) not in LAYOUTS:
                raise ValueError(f"{name} must be one of {LAYOUTS}")

    def _check_segments(self) -> None:
        check_pair(self.q_segments, self.kv_segments)
        if self.q_segments is not None:
            check_runs("q_segments", self.q_segments, self.q_len)
            check_runs("kv_segments", self.kv_segments, self.kv_len)

    def _check_blocks(self) -> None:
        pairs = [("block_q", self.q_len), ("block_kv", self.kv_len),
                 ("block_q_dkv", self.q_len), ("block_kv_dkv", self.kv_len)]
        if self.fused_bwd:
            if self.block_q_dq is not None or self.block_kv_dq is not None:
                raise ValueError("fused_bwd=True: block_q_dq and block_kv_dq must be None")
        else:
            if self.block_q_dq is None or self.block_kv_dq is None:
                raise ValueError("fused_bwd=False needs block_q_dq and block_kv_dq")
            pairs += [("block_q_dq", self.q_len), ("block_kv_dq", self.kv_len)]
        pairs += [("block_kv_compute", self.block_kv),
                  ("block_kv_dkv_compute", self.block_kv_dkv)]
        for name, whole in pairs:
            b = getattr(self, name)
            if b < LANES or b % LANES or whole % b:
                raise ValueError(
                    f"{name}={b} must be a multiple of {LANES} dividing {whole}"
                )

    def head_masks(self) -> tuple[str, ...]:
        """The mask string of every query head."""
        return self.masks * self.q_heads if len(self.masks) == 1 else self.masks

    def materialize(self) -> dict[str, np.ndarray]:
        """q (pre-scaled by 1/sqrt(head_dim)), k, v, the cotangent ``do``, and when
        present ``sinks`` and the segment id arrays.

        k/v always carry a kv-head axis (size 1 for MQA). ``do`` is zero on rows
        that see no key when the case has no sinks (see the family contract).
        """
        b, hq, hkv = self.batch, self.q_heads, self.kv_heads
        q = self.rng(0).standard_normal((b, hq, self.q_len, self.head_dim))
        out = {
            "q": cast(q * (self.logit_scale / np.sqrt(self.head_dim)), self.dtype),
            "k": standard_normal(self.rng(1), (b, hkv, self.kv_len, self.head_dim), self.dtype),
            "v": standard_normal(self.rng(2), (b, hkv, self.kv_len, self.head_dim_v), self.dtype),
        }
        do = self.rng(3).standard_normal((b, hq, self.q_len, self.head_dim_v))
        if not self.sinks:
            do = np.where(empty_rows(self)[None, :, :, None], 0.0, do)
        out["do"] = cast(do, self.dtype)
        if self.sinks:
            # Around a row's logsumexp (log of 1..512 keys), so the sink matters.
            out["sinks"] = self.rng(4).uniform(-2.0, 6.0, hq).astype(np.float32)
        if self.q_segments is not None:
            out["q_segment_ids"] = segment_ids(self.q_segments)
            out["kv_segment_ids"] = segment_ids(self.kv_segments)
        return out


def attention_definition(case: SplashCase) -> Definition:
    """Splash's softmax in the attention op's options: q arrives scaled (scale 1), soft
    cap, the denominator applied to the output, the natural log-sum-exp as an output, and
    the size of the terms summed into dq and dk (and with sinks ``dsinks``): the backward
    takes ``D = rowsum(dO * O)`` from the output, so a key seen only by queries that see
    nothing else has ``dS = 0`` exactly and a float32 ``dk`` there of ``~eps * |dP|`` per
    query (171 such queries: 1.3x the float32 bound of that key's own scale)."""
    sinks = ("dsinks",) if case.sinks else ()
    return Definition(layout="bhqd", scale=1.0, soft_cap=case.soft_cap, normalize="output",
                    lse="natural", magnitudes=("dq", "dk", *sinks))
