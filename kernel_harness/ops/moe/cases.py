"""Cases of the mixture-of-experts op and the strategy.

``tokens [devices * tokens_per_device, hidden]`` and ``gating [tokens, experts]`` are
sharded by rows over a 1-D mesh of ``devices`` devices; the experts' weights
``w1 [experts, 2, hidden, intermediate]`` (gate and up projections) and
``w2 [experts, intermediate, hidden]`` by experts (``experts_per_device`` each). Every token
goes to its ``top_k`` best-scored experts, wherever they live. The kernel's tiling is the
case's: ``bt`` tokens per step, ``bf`` of the intermediate axis, ``bd`` of the hidden axis
(``*_compute``: the sub-blocks each step computes in). The mesh size and the DMA schedule
are every collective case's (:mod:`kernel_harness.ops.mesh`).

Routing ties are outside the op's contract (which of two equal scores wins is not
specified): the gating logits of a token are distinct multiples of 1/4, far enough apart
that their scores stay distinct in bfloat16.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import cast, check_sizes, dtype_packing, standard_normal
from kernel_harness.ops.mesh import MeshCase, device_counts, dma_modes, mesh_events

SCORINGS: tuple[str, ...] = ("softmax", "sigmoid")
ACTIVATIONS: tuple[str, ...] = ("silu", "gelu", "swigluoai")
#: Spacing of a token's gating logits (distinct scores, also in bfloat16).
GATING_STEP = 0.25
#: Lanes of a TPU vreg: hidden, intermediate and their blocks are multiples of it.
LANES = 128


@dataclasses.dataclass(frozen=True, kw_only=True)
class MoeCase(MeshCase):
    """One expert-parallel MoE layer on ``devices`` devices (:class:`~kernel_harness.ops.
    mesh.MeshCase`).

    Attributes:
      tokens_per_device, hidden, intermediate, experts_per_device, top_k: the layer.
      scoring: ``softmax`` or ``sigmoid`` of the gating logits, the routing scores.
      activation: ``silu``, ``gelu`` (tanh approximation) or ``swigluoai`` (GPT-OSS's
        clipped gate): of the gate projection, times the up projection.
      renormalize: the top-k scores divided by their sum before combining.
      bias: float32 biases after each projection (b1 [experts, 2, 1, intermediate], b2
        [experts, 1, hidden]).
      bt, bf, bd: the kernel's blocks of tokens (per device; whole 8-row tiles of packed
        tokens: multiples of 8 x the packing), intermediate and hidden.
      bt_compute, bf_compute, bd_compute: the sub-blocks computed at once (dividing them).
    """

    tokens_per_device: int
    hidden: int
    intermediate: int
    experts_per_device: int
    top_k: int
    scoring: str = "softmax"
    activation: str = "silu"
    renormalize: bool = False
    bias: bool = False
    bt: int
    bf: int
    bd: int
    bt_compute: int
    bf_compute: int
    bd_compute: int

    def __post_init__(self) -> None:
        super().__post_init__()
        check_sizes(self, "tokens_per_device", "hidden", "intermediate",
                    "experts_per_device", "top_k")
        if not 1 <= self.top_k <= self.experts:
            raise ValueError(f"top_k must be in 1..experts ({self.experts}), got {self.top_k}")
        if self.scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {SCORINGS}, got {self.scoring!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got "
                             f"{self.activation!r}")
        p = dtype_packing(self.dtype)
        self._blocks("tokens_per_device", self.tokens_per_device, "bt", self.bt,
                     "bt_compute", self.bt_compute, 8 * p)
        self._blocks("intermediate", self.intermediate, "bf", self.bf, "bf_compute",
                     self.bf_compute, LANES)
        self._blocks("hidden", self.hidden, "bd", self.bd, "bd_compute", self.bd_compute,
                     LANES * p)

    def _blocks(self, name: str, size: int, block: str, b: int, compute: str, c: int,
                unit: int) -> None:
        if c < 1 or b % c or size % b or c % unit:
            raise ValueError(
                f"{compute} ({c}) must divide {block} ({b}), which must divide {name} "
                f"({size}); all multiples of {unit} for {self.dtype}")

    @property
    def experts(self) -> int:
        return self.devices * self.experts_per_device

    @property
    def tokens(self) -> int:
        return self.devices * self.tokens_per_device

    def shape_summary(self) -> str:
        """``devices=2 tokens=(16,256) experts=4x(256->128) top_k=2 softmax silu bt=8/8
        bf=128/128 bd=256/128 dma=on_wait``."""
        flags = " ".join(f for f, on in (("renormalize", self.renormalize),
                                         ("bias", self.bias)) if on)
        return (f"devices={self.devices} tokens=({self.tokens},{self.hidden}) "
                f"experts={self.experts}x({self.hidden}->{self.intermediate}) "
                f"top_k={self.top_k} {self.scoring} {self.activation}"
                f"{' ' + flags if flags else ''} bt={self.bt}/{self.bt_compute} "
                f"bf={self.bf}/{self.bf_compute} bd={self.bd}/{self.bd_compute} "
                f"dma={self.dma_mode}")

    def materialize(self) -> dict[str, np.ndarray]:
        """tokens standard normal; weights normal scaled so each projection is O(1);
        gating: per token a random order of distinct logits ``GATING_STEP`` apart, centred
        on 0; biases (with ``bias``) normal / 4, float32."""
        rng = self.rng()
        e, h, f = self.experts, self.hidden, self.intermediate
        steps = np.stack([rng.permutation(e) for _ in range(self.tokens)])
        arrays = {
            "tokens": standard_normal(rng, (self.tokens, h), self.dtype),
            "w1": cast(rng.standard_normal((e, 2, h, f)) / math.sqrt(h), self.dtype),
            "w2": cast(rng.standard_normal((e, f, h)) / math.sqrt(f), self.dtype),
            "gating": cast((steps - (e - 1) / 2) * GATING_STEP, self.dtype),
        }
        if self.bias:
            arrays["b1"] = cast(rng.standard_normal((e, 2, 1, f)) / 4, "float32")
            arrays["b2"] = cast(rng.standard_normal((e, 1, h)) / 4, "float32")
        return arrays


def moe_events(case: MoeCase) -> list[str]:
    """The kernel's paths: the mesh, several token/intermediate/hidden blocks and compute
    sub-blocks, one or several experts per token and per device, the routing options."""
    ev = [case.dtype, *mesh_events(case), f"scoring:{case.scoring}",
          f"activation:{case.activation}", "top-k=1" if case.top_k == 1 else "top-k>1"]
    for name, size, block, compute in (
            ("token", case.tokens_per_device, case.bt, case.bt_compute),
            ("intermediate", case.intermediate, case.bf, case.bf_compute),
            ("hidden", case.hidden, case.bd, case.bd_compute)):
        if size // block > 1:
            ev.append(f"multi-{name}-block")
        if name == "token" and size // block > 2:
            ev.append("token-blocks>=3")  # a block's output slot reused: waits on block - 2
        if block // compute > 1:
            ev.append(f"{name}-compute<block")
    if case.experts_per_device > 1:
        ev.append("several-experts-per-device")
    if case.renormalize:
        ev.append("renormalized")
    if case.bias:
        ev.append("bias")
    return ev


def _divisors(n: int, unit: int) -> list[int]:
    return [d for d in range(unit, n + 1, unit) if n % d == 0]


@st.composite
def moe_cases(draw: st.DrawFn, *, max_devices: int | None = None,
              dtypes: tuple[str, ...] = ("float32", "bfloat16")) -> MoeCase:
    """Valid :class:`MoeCase` s: 2..``max_devices`` devices (None: what this jax's
    interpreter runs), 1-2 experts per device, top_k up to 3, 8, 16 or 24 packed rows of
    tokens per device (up to three token blocks), hidden 256 or 512, intermediate 128 or
    256, every block and compute block that divides them, each scoring, activation and
    routing option, either DMA schedule."""
    dtype = draw(st.sampled_from(dtypes))
    p = dtype_packing(dtype)
    devices = draw(device_counts(max_devices))
    experts_per_device = draw(st.integers(1, 2))
    tokens_per_device = draw(st.sampled_from((8 * p, 16 * p, 24 * p)))
    hidden = draw(st.sampled_from((256, 512)))
    intermediate = draw(st.sampled_from((128, 256)))
    blocks = {}
    for name, size, unit in (("bt", tokens_per_device, 8 * p), ("bf", intermediate, LANES),
                             ("bd", hidden, LANES * p)):
        block = draw(st.sampled_from(_divisors(size, unit)))
        blocks[name] = block
        blocks[f"{name}_compute"] = draw(st.sampled_from(_divisors(block, unit)))
    return MoeCase(
        dtype=dtype, seed=draw(st.integers(0, 2**31 - 1)), devices=devices,
        tokens_per_device=tokens_per_device, hidden=hidden, intermediate=intermediate,
        experts_per_device=experts_per_device,
        top_k=draw(st.integers(1, min(3, devices * experts_per_device))),
        scoring=draw(st.sampled_from(SCORINGS)), activation=draw(st.sampled_from(ACTIVATIONS)),
        renormalize=draw(st.booleans()), bias=draw(st.booleans()),
        dma_mode=draw(dma_modes()), **blocks)
