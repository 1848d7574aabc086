"""Cases of the SDPA family (``jax.nn.dot_product_attention``) and their strategy.

A :class:`SdpaCase` describes one call: shapes (``query`` is ``(batch, q_len, heads,
head_dim)``, key/value ``(batch, kv_len, kv_heads, head_dim)``), which options are on
(causal, bias and mask with their broadcast shapes, explicit scale, local window, query
and key/value sequence lengths). Arrays come from :meth:`SdpaCase.materialize`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from kernel_harness.core.case import (
    cast,
    logit_scales_for,
    standard_normal,
)
from kernel_harness.ops.attention.events import length_events, sharing_events
from kernel_harness.ops.attention.program import Contract
from kernel_harness.ops.attention.reference import visibility
from kernel_harness.ops.attention.sdpa import SdpaCall

#: The dtypes whose outputs the family judges by the calibrated bound (family.py builds
#: its tolerance table from this): they draw large logits too (``logit_scales_for``).
CALIBRATED_DTYPES: frozenset[str] = frozenset({"bfloat16"})


#: Broadcast shapes of bias/mask: full (B,N,T,S), shared over batch (1,N,T,S), shared over
#: heads (B,1,T,S).
BROADCASTS = ("full", "batch-shared", "head-shared")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SdpaCase(SdpaCall):
    """One call of ``jax.nn.dot_product_attention`` and its vjp (the SDPA call's fields:
    :class:`~kernel_harness.ops.attention.sdpa.SdpaCall`; ``query`` is ``(batch, q_len,
    q_heads, head_dim)``).

    Attributes:
      bias: None or the broadcast shape of an additive bias (see :data:`BROADCASTS`).
      mask: None or the broadcast shape of a random boolean mask (True = attend).
      window: ``(left, right)`` for ``local_window_size``, or None.
      q_lengths, kv_lengths: per-batch ``query_seq_lengths`` / ``key_value_seq_lengths``.
    """

    bias: str | None = None
    window: tuple[int, int] | None = None
    q_lengths: tuple[int, ...] | None = None
    kv_lengths: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("bias", "mask"):
            if getattr(self, name) not in (None, *BROADCASTS):
                raise ValueError(f"{name} must be None or one of {BROADCASTS}")
        if self.window is not None and (len(self.window) != 2 or min(self.window) < 0):
            raise ValueError(f"window must be (left >= 0, right >= 0), got {self.window}")
        for name, length in (("q_lengths", self.q_len), ("kv_lengths", self.kv_len)):
            lengths = getattr(self, name)
            if lengths is not None and (
                len(lengths) != self.batch or not all(0 <= n <= length for n in lengths)
            ):
                raise ValueError(f"{name} must be {self.batch} values in [0, {length}]")

    def shape_summary(self) -> str:
        """``q=(2,128,4,64) kv=(256,2) causal window=(8,0) bias=full``."""
        parts = [f"q=({self.batch},{self.q_len},{self.q_heads},{self.head_dim}) "
                 f"kv=({self.kv_len},{self.kv_heads})"]
        if self.is_causal:
            parts.append("causal")
        for name in ("bias", "mask", "window", "scale", "q_lengths", "kv_lengths"):
            if getattr(self, name) is not None:
                parts.append(f"{name}={getattr(self, name)}")
        if self.logit_scale != 1.0:
            parts.append(f"logits={self.logit_scale:g}x")
        return " ".join(str(p).replace(" ", "") for p in parts)

    def static_key(self) -> tuple[object, ...]:
        """What selects a compiled program: shapes, dtype, which options are on, scale,
        window (not the data, the mask's values, the lengths' values or the logit scale)."""
        return (
            self.dtype, self.batch, self.q_len, self.kv_len, self.q_heads, self.kv_heads,
            self.head_dim, self.is_causal, self.bias, self.mask, self.scale, self.window,
            self.q_lengths is not None, self.kv_lengths is not None,
        )

    def broadcast_shape(self, kind: str) -> tuple[int, int, int, int]:
        """The 4-D shape of a bias/mask of broadcast ``kind``."""
        b = 1 if kind == "batch-shared" else self.batch
        n = 1 if kind == "head-shared" else self.q_heads
        return (b, n, self.q_len, self.kv_len)

    def mask_array(self) -> np.ndarray | None:
        """The boolean mask (from the seed), or None."""
        if self.mask is None:
            return None
        return self.rng(1).random(self.broadcast_shape(self.mask)) < self.mask_keep

    def visible(self, *, without: str | None = None) -> np.ndarray:
        """``(batch, heads, q_len, kv_len)`` bool from the description; ``without`` names
        one option ("causal", "mask", "window", "kv_lengths", "q_lengths") to leave out."""
        def unless(option: str, value: Any) -> Any:
            return None if without == option else value

        vis = visibility(self.q_len, self.kv_len, causal=self.is_causal and without != "causal",
                         window=unless("window", self.window),
                         mask=unless("mask", self.mask_array()),
                         kv_lengths=unless("kv_lengths", self.kv_lengths),
                         q_lengths=unless("q_lengths", self.q_lengths), xp=np)
        return np.array(np.broadcast_to(vis, (self.batch, self.q_heads, self.q_len, self.kv_len)))

    def padding_rows(self) -> np.ndarray:
        """``(batch, q_len)`` bool: query rows at or past ``q_lengths`` (output zero)."""
        if self.q_lengths is None:
            return np.zeros((self.batch, self.q_len), bool)
        return np.arange(self.q_len)[None, :] >= np.asarray(self.q_lengths)[:, None]

    def rows_outside_contract(self) -> np.ndarray:
        """``(batch, heads, q_len)`` bool: rows that see no key and are not padding rows."""
        return ~self.visible().any(-1) & ~self.padding_rows()[:, None, :]

    def materialize(self) -> dict[str, np.ndarray]:
        """query, key, value, do (zero on rows outside the contract), bias and mask when on,
        and int32 ``q_lengths``/``kv_lengths`` when on."""
        rng = self.rng()
        out = self.draw_qkv(rng, "bqhd")
        do = rng.standard_normal(self.query_shape("bqhd"))
        do[np.transpose(self.rows_outside_contract(), (0, 2, 1))] = 0.0
        out["do"] = cast(do, self.dtype)
        if self.bias is not None:
            out["bias"] = standard_normal(rng, self.broadcast_shape(self.bias), self.dtype)
        if self.mask is not None:
            out["mask"] = self.mask_array()
        if self.q_lengths is not None:
            out["q_lengths"] = np.asarray(self.q_lengths, np.int32)
        if self.kv_lengths is not None:
            out["kv_lengths"] = np.asarray(self.kv_lengths, np.int32)
        return out


OPTIONS = ("causal", "window", "mask", "kv_lengths", "q_lengths")

#: Features an implementation may declare it lacks (``--without``), and what the strategy
#: then stops drawing.
OPTIONAL = {
    "bias": "no additive bias (and no dbias)",
    "mask": "no boolean mask argument",
    "causal": "is_causal always False",
    "window": "no local_window_size",
    "q-lengths": "no query_seq_lengths (no padding query rows)",
    "kv-lengths": "no key_value_seq_lengths",
    "scale": "scale always None (the default 1/sqrt(head_dim))",
    "gqa": "kv_heads == heads (no grouped- or multi-query attention)",
    "q-len-ne-kv-len": "q_len == kv_len",
    "unaligned-lengths": "q_len and kv_len multiples of 128 (e.g. tokamax's mosaic backend "
    "needs aligned lengths)",
    "bias-gradient": "bias in the forward only: dbias is not compared (a bias is still drawn)",
}

#: Sequence lengths drawn without ``unaligned-lengths``.
ALIGNED_LENGTHS: tuple[int, ...] = (128, 256)
_DRAW_NAME = {"bias": "bias", "mask": "mask", "causal": "causal", "window": "window",
              "q-lengths": "q_lengths", "kv-lengths": "kv_lengths", "scale": "scale",
              "q-len-ne-kv-len": "differ"}


def effective_options(case: SdpaCase) -> list[str]:
    """The masking options whose removal would change which keys some row sees."""
    vis = case.visible()
    return [o for o in OPTIONS if not np.array_equal(vis, case.visible(without=o))]


def _mostly(draw: st.DrawFn, in_4: int = 3) -> bool:
    """True about ``in_4`` times in 4; shrinks towards False."""
    return draw(st.integers(0, 3)) >= 4 - in_4


def _short_lengths(draw: st.DrawFn, batch: int, length: int, *, lowest: int) -> tuple[int, ...]:
    """Per-batch lengths in ``[lowest, length]``, at least one shorter than ``length``."""
    first = draw(st.integers(lowest, length - 1))
    return (first, *(draw(st.integers(lowest, length)) for _ in range(batch - 1)))


@st.composite
def sdpa_cases(
    draw: st.DrawFn,
    *,
    dtypes: tuple[str, ...] = ("float32", "bfloat16"),
    max_batch: int = 3,
    lengths: tuple[int, ...] = (16, 32, 64, 128, 40, 8),
    q_only_lengths: tuple[int, ...] = (1,),
    head_dims: tuple[int, ...] = (32, 64, 16, 128),
    without: frozenset[str] = frozenset(),
) -> SdpaCase:
    """Draws an :class:`SdpaCase`.

    Causal attention, q_len != kv_len and a mask are drawn 3 times in 4 (at half a ci run
    drew no full-layout mask), every other option
    half the time, the logit scale from :func:`logit_scales_for` (dtype); an option, when
    on, is drawn so that it changes what some row sees (a window narrower than the
    sequence, lengths shorter than it, a mask with False entries): an implementation
    ignoring an option fails.
    Shrinks towards float32, batch 1, equal lengths 16, 1 head, no options.
    ``without`` names :data:`OPTIONAL` features never drawn (an unknown name is an error).
    """
    unknown = set(without) - set(OPTIONAL)
    if unknown:
        raise ValueError(f"sdpa: unknown optional features {sorted(unknown)}; known: "
                         f"{sorted(OPTIONAL)}")
    off = {_DRAW_NAME[f] for f in without if f in _DRAW_NAME}
    if "unaligned-lengths" in without:
        lengths, q_only_lengths = ALIGNED_LENGTHS, ()
    # Which options are on comes first: Hypothesis varies early choices most.
    on = {name: name not in off and _mostly(draw, 3 if name in ("causal", "differ", "mask") else 2)
          for name in
          ("causal", "differ", "bias", "mask", "scale", "window", "kv_lengths", "q_lengths")}
    dtype = draw(st.sampled_from(dtypes))
    batch = draw(st.integers(1, max_batch))
    kv_len = draw(st.sampled_from(lengths))
    q_len = draw(st.sampled_from(lengths + q_only_lengths)) if on["differ"] else kv_len
    kv_heads = draw(st.sampled_from((1, 2)))
    heads = kv_heads * draw(st.sampled_from((1, 2, 3)))
    if "gqa" in without:
        kv_heads = heads
    head_dim = draw(st.sampled_from(head_dims))
    fields: dict = {"is_causal": on["causal"]}
    if on["bias"]:
        fields["bias"] = draw(st.sampled_from(BROADCASTS))
    if on["mask"]:
        fields["mask"] = draw(st.sampled_from(BROADCASTS))
        fields["mask_keep"] = draw(st.sampled_from((0.7, 0.3, 0.9)))
    if on["scale"]:
        fields["scale"] = draw(st.sampled_from((0.5, 2.0, 1.0))) / math.sqrt(head_dim)
    longest = max(q_len, kv_len)
    if on["window"] and longest > 2:
        left = draw(st.integers(0, longest - 2))
        right = 0 if draw(st.booleans()) is False else draw(st.integers(0, longest - 2))
        fields["window"] = (left, right)
    if on["kv_lengths"]:
        fields["kv_lengths"] = _short_lengths(draw, batch, kv_len, lowest=1)
    if on["q_lengths"] and q_len > 1:
        fields["q_lengths"] = _short_lengths(draw, batch, q_len, lowest=0)
    fields["logit_scale"] = draw(st.sampled_from(
        logit_scales_for(dtype, calibrated=dtype in CALIBRATED_DTYPES)))
    case = SdpaCase(
        dtype=dtype, seed=draw(st.integers(0, 2**31 - 1)), batch=batch, q_len=q_len,
        kv_len=kv_len, q_heads=heads, kv_heads=kv_heads, head_dim=head_dim, **fields,
    )
    # Options drawn but without effect (a window wider than the causal reach, lengths
    # equal to the sequence...) would hide an implementation ignoring them; and at least
    # one row must see two keys, or dq/dk/dbias are identically zero.
    assume(drawable(case))
    return case


def drawable(case: SdpaCase) -> bool:
    """Whether :func:`sdpa_cases` keeps ``case``: every option drawn has an effect (a
    window wider than the causal reach, lengths equal to the sequence... would hide an
    implementation ignoring it), and some row sees two keys (else dq/dk/dbias are zero)."""
    used = {o for o in OPTIONS if (o == "causal" and case.is_causal)
            or (o != "causal" and getattr(case, o) is not None)}
    return used <= set(effective_options(case)) and bool((case.visible().sum(-1) >= 2).any())


def sdpa_data_draws(case: SdpaCase) -> st.SearchStrategy[SdpaCase]:
    """Cases of ``case``'s compiled program (``Family.data_draws``): another data seed and
    logit scale. The seed also draws a random mask's values, so a draw must still be one
    :func:`sdpa_cases` keeps (:func:`drawable`)."""
    scales = logit_scales_for(case.dtype, calibrated=case.dtype in CALIBRATED_DTYPES)
    return st.builds(lambda seed, scale: dataclasses.replace(case, seed=seed, logit_scale=scale),
                     st.integers(0, 2**31 - 1), st.sampled_from(scales)).filter(drawable)


def sdpa_events(case: SdpaCase) -> list[str]:
    """Coverage labels: dtype, GQA/MQA, options on, rows outside the contract."""
    ev = [case.dtype]
    ev += sharing_events(case) + length_events(case.q_len, case.kv_len)
    if case.is_causal:
        ev.append("causal")
    if case.bias is not None:
        ev.append(f"bias-{case.bias}")
    if case.mask is not None:
        ev.append(f"mask-{case.mask}")
    if case.scale is not None:
        ev.append("explicit-scale")
    if case.window is not None:
        ev.append("window" if case.window[1] else "window-left-only")
    if case.kv_lengths is not None:
        ev.append("kv-lengths")
    if case.q_lengths is not None:
        ev.append("q-lengths")
        if case.padding_rows().any():
            ev.append("padding-rows")
    if case.rows_outside_contract().any():
        ev.append("rows-without-keys")
    ev.append(f"logits-{case.logit_scale:g}x")
    return ev


def attention_contract(case: SdpaCase) -> Contract:
    """jax.nn's softmax in the attention op's options: ``scale * q.k^T + bias`` (the bias
    after scaling), scale 1/sqrt(head_dim) unless given; dq, dk and dbias judged against the
    size of the terms summed into them (``dS = P (dP - D)`` cancels: at 16x logits a float32
    row's dq is ~1e-5 of its terms, and XLA's float32 rounding of them is not the
    reference's)."""
    return Contract(layout="bqhd", scale=case.effective_scale,
                    magnitudes=("dq", "dk", *(("dbias",) if case.bias else ())))
