"""Cases of the ``torch-sdpa`` family: one call of
``torch.nn.functional.scaled_dot_product_attention`` in torch's layout.

``query`` is ``(batch, heads, q_len, head_dim)``, key/value ``(batch, kv_heads, kv_len,
head_dim)``, ``attn_mask`` (when drawn) ``(batch, heads, q_len, kv_len)``: bool (True =
attend) or float (added to the scaled logits). torch refuses ``attn_mask`` together with
``is_causal``, so a case has at most one of them. ``backend`` names the CPU SDPA kernel
(``torch.nn.attention.sdpa_kernel``): ``math`` or ``flash``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from kernel_harness.core.case import (
    logit_scales_for,
    standard_normal,
)
from kernel_harness.ops.attention.events import length_events
from kernel_harness.ops.attention.program import Contract
from kernel_harness.ops.attention.reference import visibility
from kernel_harness.ops.attention.sdpa import SdpaCall

MASKS = ("bool", "float")
#: torch's SDPA kernels a case can pin (``torch.nn.attention.SDPBackend`` names, lowercase).
SDPA_KERNELS = ("math", "flash")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TorchSdpaCase(SdpaCall):
    """One SDPA call and its backward (the SDPA call's fields:
    :class:`~kernel_harness.ops.attention.sdpa.SdpaCall`; ``enable_gqa`` is passed as
    ``kv_heads != q_heads``; the causal mask is torch's, top-left aligned).

    Attributes:
      mask: None, ``"bool"`` or ``"float"`` (a full ``(batch, heads, q_len, kv_len)``
        ``attn_mask``).
      empty_row: a bool mask's query row 0 sees no key (torch's output there is 0).
      backend: the SDPA kernel pinned by ``sdpa_kernel`` (:data:`SDPA_KERNELS`).
    """

    empty_row: bool = False
    backend: str = "math"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mask not in (None, *MASKS):
            raise ValueError(f"mask must be None or one of {MASKS}, got {self.mask!r}")
        if self.mask is not None and self.is_causal:
            raise ValueError("torch refuses attn_mask together with is_causal=True")
        if self.empty_row and self.mask != "bool":
            raise ValueError("empty_row needs a bool mask")
        if self.backend not in SDPA_KERNELS:
            raise ValueError(f"backend must be one of {SDPA_KERNELS}, got {self.backend!r}")

    @property
    def enable_gqa(self) -> bool:
        return self.kv_heads != self.q_heads

    def shape_summary(self) -> str:
        """``q=(1,4,16,32) kv=(2,40) causal mask=bool scale=0.1 flash``."""
        parts = [f"q=({self.batch},{self.q_heads},{self.q_len},{self.head_dim}) "
                 f"kv=({self.kv_heads},{self.kv_len})"]
        if self.is_causal:
            parts.append("causal")
        if self.mask is not None:
            parts.append(f"mask={self.mask}" + ("+empty-row" if self.empty_row else ""))
        if self.scale is not None:
            parts.append(f"scale={self.scale:.4g}")
        parts.append(self.backend)
        if self.logit_scale != 1.0:
            parts.append(f"logits={self.logit_scale:g}x")
        return " ".join(parts)

    def static_key(self) -> tuple[object, ...]:
        """Everything but the data (seed, mask values, logit scale)."""
        return (self.dtype, self.batch, self.q_heads, self.kv_heads, self.q_len, self.kv_len,
                self.head_dim, self.is_causal, self.mask, self.scale, self.backend)

    def bool_mask(self) -> np.ndarray | None:
        """The bool ``attn_mask`` (from the seed), or None."""
        if self.mask != "bool":
            return None
        keep = self.rng(1).random((self.batch, self.q_heads, self.q_len, self.kv_len))
        m = keep < self.mask_keep
        if self.empty_row:
            m[:, :, 0, :] = False
        return m

    def visible(self) -> np.ndarray:
        """``(batch, heads, q_len, kv_len)``: which key each query row sees."""
        vis = visibility(self.q_len, self.kv_len, causal=self.is_causal, mask=self.bool_mask(),
                         xp=np)
        return np.array(np.broadcast_to(vis, (self.batch, self.q_heads, self.q_len, self.kv_len)))

    def materialize(self) -> dict[str, np.ndarray]:
        """query, key, value, do (torch layout) and ``mask`` when drawn."""
        rng = self.rng()
        out = self.draw_qkv(rng, "bhqd")
        out["do"] = standard_normal(rng, self.query_shape("bhqd"), self.dtype)
        if self.mask == "bool":
            out["mask"] = self.bool_mask()
        elif self.mask == "float":
            shape = (self.batch, self.q_heads, self.q_len, self.kv_len)
            out["mask"] = standard_normal(rng, shape, self.dtype)
        return out


def drawable(case: TorchSdpaCase) -> bool:
    """Some row sees two keys (else dq/dk vanish); a bool mask hides some key."""
    vis = case.visible()
    return bool((vis.sum(-1) >= 2).any()) and (case.mask != "bool" or not vis.all())


@st.composite
def torch_sdpa_cases(
    draw: st.DrawFn,
    *,
    dtypes: tuple[str, ...] = ("float32", "bfloat16"),
    lengths: tuple[int, ...] = (16, 32, 8, 40, 64),
    head_dims: tuple[int, ...] = (32, 16, 64),
) -> TorchSdpaCase:
    """Draws a :class:`TorchSdpaCase`; shrinks towards causal off, no mask, math, float32,
    batch 1, equal lengths 16, one head."""
    # torch refuses a mask with is_causal: causal half the time, else a mask 2 times in 3.
    causal = draw(st.booleans())
    masked = None if causal else draw(st.sampled_from((None, *MASKS)))
    backend = draw(st.sampled_from(SDPA_KERNELS))
    dtype = draw(st.sampled_from(dtypes))
    batch = draw(st.integers(1, 2))
    kv_len = draw(st.sampled_from(lengths))
    q_len = draw(st.sampled_from((kv_len, *lengths, 1)))
    kv_heads = draw(st.sampled_from((1, 2)))
    heads = kv_heads * draw(st.sampled_from((1, 2, 3)))
    head_dim = draw(st.sampled_from(head_dims))
    fields: dict = {}
    if masked == "bool":
        fields["mask_keep"] = draw(st.sampled_from((0.7, 0.3, 0.9)))
        fields["empty_row"] = draw(st.booleans())
    if draw(st.booleans()):
        fields["scale"] = draw(st.sampled_from((0.5, 2.0))) / math.sqrt(head_dim)
    fields["logit_scale"] = draw(st.sampled_from(logit_scales_for(dtype)))
    case = TorchSdpaCase(
        dtype=dtype, seed=draw(st.integers(0, 2**31 - 1)), batch=batch, q_heads=heads,
        kv_heads=kv_heads, q_len=q_len, kv_len=kv_len, head_dim=head_dim, is_causal=causal,
        mask=masked, backend=backend, **fields)
    assume(drawable(case))
    return case


def torch_sdpa_data_draws(case: TorchSdpaCase) -> st.SearchStrategy[TorchSdpaCase]:
    """Other data of ``case``'s configuration: seed (a bool mask's values) and logit scale."""
    return st.builds(lambda seed, scale: dataclasses.replace(case, seed=seed, logit_scale=scale),
                     st.integers(0, 2**31 - 1),
                     st.sampled_from(logit_scales_for(case.dtype))).filter(drawable)


def torch_sdpa_events(case: TorchSdpaCase) -> list[str]:
    """Coverage labels: dtype, kernel, GQA/MQA, options, rows that see no key."""
    ev = [case.dtype, f"kernel-{case.backend}"]
    if case.enable_gqa:
        ev.append("mqa" if case.kv_heads == 1 else "gqa")
    if case.q_len != case.kv_len:
        ev += length_events(case.q_len, case.kv_len)
    if case.is_causal:
        ev.append("causal")
    if case.mask is not None:
        ev.append(f"mask-{case.mask}")
    if case.scale is not None:
        ev.append("explicit-scale")
    if not case.visible().any(-1).all():
        ev.append("rows-without-keys")
    ev.append(f"logits-{case.logit_scale:g}x")
    return ev


def torch_sdpa_seed_cases(without: frozenset[str] = frozenset()) -> list[TorchSdpaCase]:
    """Hand-made cases every run tries first (``Family.seed_cases``): the derandomized ci
    profile's 30 draws reached no bool mask and one q_len < kv_len case. A bool mask with
    a row that sees no key on each kernel, a float mask (its gradient, math), causal with
    q_len < kv_len (top-left) under GQA."""
    del without  # the family declares no optional features
    base = dict(seed=11, batch=1, q_heads=4, kv_heads=2, head_dim=16)
    return [
        TorchSdpaCase(dtype="float32", q_len=8, kv_len=16, mask="bool", empty_row=True,
                      mask_keep=0.5, backend="math", **base),
        TorchSdpaCase(dtype="bfloat16", q_len=16, kv_len=16, mask="bool", empty_row=True,
                      backend="flash", **base),
        TorchSdpaCase(dtype="float32", q_len=16, kv_len=8, mask="float", scale=0.2,
                      backend="math", **base),
        TorchSdpaCase(dtype="float32", q_len=8, kv_len=32, is_causal=True, backend="flash",
                      **base),
    ]


def attention_contract(case: TorchSdpaCase) -> Contract:
    """torch's softmax in the attention op's options: torch's ``bhqd`` layout, a float
    ``attn_mask`` added after scaling, scale 1/sqrt(head_dim) unless given."""
    return Contract(layout="bhqd", scale=case.effective_scale)
