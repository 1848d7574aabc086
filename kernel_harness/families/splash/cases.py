"""Splash attention's case: the attention problem (:class:`~kernel_harness.ops.attention.
problem.AttentionProblem`) as splash's factory takes it, and splash's own configuration
(``make_splash_mqa``, its BlockSizes, the q/k/v layouts).

q arrives pre-scaled (splash applies no scale), masks are static per-head expressions in
the op's mask language, one segment layout serves every batch row (the kernel is vmapped
over the batch), a soft cap and sinks are options, v may have its own head size. Every
input has its own random stream of the seed (the stored cases' inputs keep them). The
strategy drawing cases is :mod:`kernel_harness.families.splash.strategy`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kernel_harness.ops.attention.features import Features
from kernel_harness.ops.attention.problem import AttentionProblem

#: Sequence lengths the strategy draws (multiples of the kernel's 128 lanes).
SEQ_LENS: tuple[int, ...] = (128, 256, 384, 512)
#: Block sizes must be multiples of this (the kernel's lane count).
LANES = 128
LAYOUTS: tuple[str, ...] = ("head_dim_minor", "seq_minor")
HEAD_DIMS: tuple[int, ...] = (64, 128, 256)
#: The sizes a splash case took where it gave none, before splash was on the attention
#: problem (whose sizes have no defaults): stored and hand-written cases keep loading.
OLD_DEFAULTS: dict[str, int] = {"batch": 1, "q_heads": 1, "kv_heads": 1, "q_len": 128,
                                "kv_len": 128, "head_dim": 128}


@dataclasses.dataclass(frozen=True, kw_only=True)
class SplashCase(AttentionProblem):
    """One splash attention call and its vjp: the attention problem and splash's own
    configuration.

    Attributes:
      mqa: use ``make_splash_mqa`` (k/v carry no head axis); needs kv_heads 1.
      block_*: the kernel's BlockSizes; ``block_q_dq``/``block_kv_dq`` are None
        exactly when ``fused_bwd`` (the fused dq+dkv backward kernel).
      q_layout, k_layout, v_layout: ``head_dim_minor`` or ``seq_minor``.
    """

    mqa: bool = False
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

    FEATURES = Features(
        layout="bhqd",
        names={"q": "q", "k": "k", "v": "v", "do": "do", "sinks": "sinks",
               "segment_ids_q": "q_segment_ids", "segment_ids_kv": "kv_segment_ids"},
        optional=frozenset({"segments", "soft-cap", "sinks", "per-head-masks", "gqa",
                            "local-window", "chunked-causal", "numpy-mask", "head-dim-v",
                            "q-len-ne-kv-len"}),
        config_optional={
            "layouts": "head-dim-minor layouts only (no seq-minor q/k/v)",
            "split-bwd": "fused backward only (use_fused_bwd_kernel=True: no separate dq "
                         "kernel)"},
        static_masks=True,
        segment_rows="shared",
        streams="per-input",
        fixed_scale=1.0,
        # The denominator divides the output; the backward takes D = rowsum(dO * O) from
        # the output, so a key seen only by queries that see nothing else has dS = 0
        # exactly and a float32 dk there of ~eps * |dP| per query (171 such queries: 1.3x
        # the float32 bound of that key's own scale): dq and dk judged against their
        # summed terms, and dsinks too.
        normalize="output",
        magnitudes=("dq", "dk", "dsinks"),
        lse="natural",
        calibrated=frozenset({"bfloat16"}),
        # dsinks keeps a fixed bound (the plain bf16 yardstick of its sum is erratic: 1e-4
        # to 5.5e-2), which large logits exceed in bf16 (4.8e-3 > 4e-3 at 16x, README).
        unit_logits_with=frozenset({"sinks"}),
        lengths=SEQ_LENS,
        head_dims=HEAD_DIMS,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.dtype not in self.FEATURES.dtypes:
            raise ValueError(f"splash runs {self.FEATURES.dtypes}, not {self.dtype!r}")
        if self.mqa and self.kv_heads != 1:
            raise ValueError("mqa=True needs kv_heads=1")
        for name in ("q_len", "kv_len"):
            n = getattr(self, name)
            if n < LANES or n % LANES:
                raise ValueError(f"{name}={n} must be a positive multiple of {LANES}")
        for name, size in (("head_dim", self.head_dim), ("head_dim_v", self.value_dim)):
            if size not in HEAD_DIMS:
                raise ValueError(f"{name} must be one of {HEAD_DIMS}")
        self._check_blocks()
        for name in ("q_layout", "k_layout", "v_layout"):
            if getattr(self, name) not in LAYOUTS:
                raise ValueError(f"{name} must be one of {LAYOUTS}")

    @classmethod
    def upgraded(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Cases stored before splash was on the attention problem: sizes they leave out
        take splash's old defaults (:data:`OLD_DEFAULTS`), one segment layout (runs) for
        every batch row is now one per row, and ``head_dim_v`` equal to ``head_dim`` is
        None."""
        out = {**OLD_DEFAULTS, **data}
        for name in ("q_segments", "kv_segments"):
            runs = out.get(name)
            if runs and isinstance(runs[0][0], int):
                out[name] = [runs] * out.get("batch", 1)
        if "head_dim" in out and out.get("head_dim_v") == out["head_dim"]:
            out["head_dim_v"] = None
        return out

    def as_mha_fields(self) -> dict[str, Any]:
        """What the GQA-as-MHA case changes besides the heads: splash's MHA kernel
        (``make_splash_mqa`` needs one kv head)."""
        return {"mqa": False}

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
