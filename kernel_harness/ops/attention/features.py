"""What one kernel takes of the attention problem, and how it defines it: its
:class:`Features` declaration (the attention op's vocabulary of optional features is
:data:`OPTIONAL`, written once for every kernel of the op).

A kernel's case type sets ``FEATURES`` (``class SdpaCase(AttentionProblem): FEATURES =
Features(...)``); the op draws, checks, labels, excludes and judges its cases from it
(:mod:`.strategy`, :mod:`.record`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kernel_harness.ops.attention.designs import DESIGNS, unmodelled
from kernel_harness.ops.attention.problem import ALIGNMENTS
from kernel_harness.ops.attention.program import LSE_BASES, MAGNITUDES
from kernel_harness.ops.attention.vocabulary import LAYOUTS

#: The attention problem's optional features: what an implementation may declare it lacks
#: (``--without``) and what the strategy then stops drawing.
OPTIONAL: dict[str, str] = {
    "bias": "no additive bias (and no bias gradient)",
    "mask": "no boolean mask argument",
    "causal": "is_causal always False",
    "window": "no local window",
    "q-lengths": "no query lengths (no padding query rows)",
    "kv-lengths": "no key lengths",
    "kv-starts": "no key start offsets (a one-query decode kernel's start_idx)",
    "scale": "scale always None (the default 1/sqrt(head_dim))",
    "gqa": "kv_heads == q_heads (no grouped- or multi-query attention)",
    "q-len-ne-kv-len": "q_len == kv_len",
    "unaligned-lengths": "q_len and kv_len multiples of 128 (e.g. tokamax's mosaic backend "
    "needs aligned lengths)",
    "bias-gradient": "bias in the forward only: its gradient is not compared (a bias is "
    "still drawn)",
    "segments": "no segment ids",
    "soft-cap": "no attn_logits_soft_cap",
    "sinks": "no attention sinks",
    "head-dim-v": "head_dim_v == head_dim",
    # The static masks' language (a kernel taking ``masks``: Features.static_masks).
    "per-head-masks": "one mask shared by every head",
    "local-window": "no local(...) mask leaves",
    "chunked-causal": "no chunked(...) mask leaves",
    "numpy-mask": "computable masks only: no random/boxes leaves, numpy(...) or a & b",
}
#: What a kernel takes by default: the options of a plain ``(q, k, v)`` call (segment ids,
#: key starts, soft cap, sinks, another value head size and static masks are declared).
DEFAULT_OPTIONAL: frozenset[str] = frozenset({
    "bias", "mask", "causal", "window", "q-lengths", "kv-lengths", "scale", "gqa",
    "q-len-ne-kv-len", "unaligned-lengths", "bias-gradient"})

#: The problem's field each drawable feature turns on (features not here narrow the draw
#: otherwise: sizes, head sharing, what is compared).
FIELD_OF: dict[str, str] = {
    "causal": "is_causal", "mask": "mask", "bias": "bias", "window": "window",
    "q-lengths": "q_lengths", "kv-lengths": "kv_lengths", "kv-starts": "kv_starts",
    "scale": "scale",
    "segments": "q_segments",
    "soft-cap": "soft_cap",
    "sinks": "sinks",
    "head-dim-v": "head_dim_v",
}

#: The op's input names (q, k, v, the cotangent, bias, mask, lengths, segment ids).
INPUTS: tuple[str, ...] = ("q", "k", "v", "do", "bias", "mask", "q_lengths", "kv_lengths",
                           "kv_starts", "segment_ids_q", "segment_ids_kv", "sinks")
#: The empty-row conventions: a row that sees no key is outside the contract (jax.nn's
#: mean of v there), or the kernel gives exactly zero there (torch).
EMPTY_ROWS: tuple[str, ...] = ("outside", "zero")
#: Sequence lengths drawn without ``unaligned-lengths``.
ALIGNED_LENGTHS: tuple[int, ...] = (128, 256)
#: The shape of the zero bias gradient a kernel gives for a case without a bias:
#: ``scalar`` ``(1, 1, 1, 1)``, ``full`` ``(batch, q_heads, q_len, kv_len)``.
ABSENT_DBIAS: tuple[str, ...] = ("scalar", "full")
#: Segment layouts: ``per-row`` (one per batch row, ids ``[batch, len]``) or ``shared``
#: (one for every batch row, ids ``[len]``: a kernel vmapped over the batch).
SEGMENT_ROWS: tuple[str, ...] = ("per-row", "shared")
#: Where the inputs' random data comes from: ``one`` stream of the case's seed, in the
#: inputs' order, or ``per-input``: each its own (:data:`~.arrays.STREAMS`).
STREAMS: tuple[str, ...] = ("one", "per-input")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Features:
    """One kernel's declaration of the attention problem.

    Attributes:
      layout: q/k/v layout (:data:`~.vocabulary.LAYOUTS`).
      names: the kernel's input name of each op input (:data:`INPUTS`) it takes.
      outputs: the kernel's name of an op output where it differs (torch's ``dmask``).
      optional: the :data:`OPTIONAL` features the kernel takes (the rest are never drawn;
        by default all but segments, whose ids are inputs of their own, and key starts).
      broadcasts: the bias/mask broadcast shapes it takes.
      exclusive: groups of features of which a case uses at most one (torch's one
        ``attn_mask`` argument, refused with ``is_causal``).
      empty_rows: :data:`EMPTY_ROWS`: how the kernel defines a row that sees no key.
      alignments: where its causal and window masks put the query rows
        (:data:`~.problem.ALIGNMENTS`; drawn from these, the first where a case shrinks).
      gradients: whether it has a backward (dq, dk, dv and the bias gradient judged).
      magnitudes: gradients judged against the size of the terms summed into them
        (``Definition.magnitudes``; ``dbias`` only where the case has a bias).
      bias_before_scale: logits ``(q.k^T + bias) * scale`` (``Definition.
        bias_before_scale``); the bias is then drawn over the scale (O(1) logits).
      absent_dbias: :data:`ABSENT_DBIAS`: the zero bias gradient of a case without a bias.
      calibrated: dtypes judged by the calibrated bound (they draw large logits too).
      dtypes, max_batch, lengths, q_only_lengths, head_dims: what the strategy draws
        (``lengths``: key lengths, and query lengths with ``q_only_lengths``).
      max_batch_heads: at most this many (batch row, head) pairs (None: no bound).
      scales: an explicit scale is drawn as one of these multiples of 1/sqrt(head_dim),
        or 1.0 itself with ``unit_scale`` (a kernel whose own default is 1 and skips its
        scaling there).
      scale_span: one explicit scale in four is drawn anywhere in this span of multiples
        of 1/sqrt(head_dim) instead, log-uniform (None: the menu only; round 14 of the
        adversarial set clamped gpu-decode's scale to 1 past 1.0, where the menu stopped
        at 0.5).
      magnitude_dtypes: the dtypes in which ``magnitudes`` apply (None: every dtype; a
        float32 judge that must still see a kernel rounding to bfloat16 inside keeps the
        gradients' own sizes as their scales).
      lse: the log-sum-exp the kernel returns as an output, in that base
        (:data:`~.program.LSE_BASES`), or None.
      shared_segments: one segment-id array serves queries and keys (``names`` maps both
        to it): segments need one layout for both, so equal lengths.
      causal_q_le_kv: causal only with ``q_len <= kv_len`` (a kernel limit the strategy
        keeps: it swaps the lengths of a causal draw).
      query_axis: False for a kernel taking one query per row with no query axis (a
        decode step: q ``[batch, heads, head_dim]``, lse ``[batch, heads]``; q_len is 1).
      scalar_bounds: the kernel also takes ``kv_starts``/``kv_lengths`` as one scalar for
        every row (drawn half the time).
      kv_head_counts, groups: the strategy draws ``kv_heads`` from the first and query
        heads per kv head from the second (the kernel's head tiling decides what matters).
      static_masks: the kernel takes static masks in the op's mask language (``masks``).
      segment_rows: :data:`SEGMENT_ROWS`: one segment layout per batch row, or one shared.
      streams: :data:`STREAMS`: where the inputs' random data comes from.
      fixed_scale: the kernel applies this scale and takes no other (1.0: q arrives
        pre-scaled, as splash's does); q is drawn so that the logits stay O(1).
      normalize: where the kernel's softmax denominator divides (``Definition.normalize``),
        or None: the op's default.
      config_optional: optional features of the kernel's own configuration (not of the
        problem: splash's layouts), described; ``--without`` takes them too.
      unit_logits_with: features whose outputs keep a fixed bound that large logits would
        exceed: a case using one draws 1x logits only (splash's dsinks).
      precision_design: where the kernel rounds (:data:`~.designs.DESIGNS`): the calibrated
        judge's low-precision twin rounds there too (``flash``: FlashAttention's numerics;
        ``jax-flash``: jax's TPU Pallas flash attention, whose forward path the case gives
        through ``definition_options``' ``kv_block``).
    """

    layout: str
    names: Mapping[str, str]
    outputs: Mapping[str, str] = dataclasses.field(default_factory=dict)
    optional: frozenset[str] = DEFAULT_OPTIONAL
    broadcasts: tuple[str, ...] = ("full", "batch-shared", "head-shared")
    exclusive: tuple[frozenset[str], ...] = ()
    empty_rows: str = "outside"
    alignments: tuple[str, ...] = ("top-left",)
    gradients: bool = True
    magnitudes: tuple[str, ...] = ()
    calibrated: frozenset[str] = frozenset()
    dtypes: tuple[str, ...] = ("float32", "bfloat16")
    max_batch: int = 3
    lengths: tuple[int, ...] = (16, 32, 64, 128, 40, 8)
    q_only_lengths: tuple[int, ...] = (1,)
    head_dims: tuple[int, ...] = (32, 64, 16, 128)
    bias_before_scale: bool = False
    absent_dbias: str = "scalar"
    max_batch_heads: int | None = None
    scales: tuple[float, ...] = (0.5, 2.0, 1.0)
    scale_span: tuple[float, float] | None = None
    unit_scale: bool = False
    magnitude_dtypes: tuple[str, ...] | None = None
    lse: str | None = None
    shared_segments: bool = False
    causal_q_le_kv: bool = False
    query_axis: bool = True
    scalar_bounds: bool = False
    kv_head_counts: tuple[int, ...] = (1, 2)
    groups: tuple[int, ...] = (1, 2, 3)
    static_masks: bool = False
    segment_rows: str = "per-row"
    streams: str = "one"
    fixed_scale: float | None = None
    normalize: str | None = None
    config_optional: Mapping[str, str] = dataclasses.field(default_factory=dict)
    unit_logits_with: frozenset[str] = frozenset()
    precision_design: str = "plain"

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"Features.layout must be one of {LAYOUTS}, got {self.layout!r}")
        for what, names, known in (("names", self.names, INPUTS),
                                   ("optional", self.optional, OPTIONAL),
                                   ("magnitudes", self.magnitudes, MAGNITUDES),
                                   *(("exclusive", g, FIELD_OF) for g in self.exclusive)):
            unknown = set(names) - set(known)
            if unknown:
                raise ValueError(f"Features.{what}: unknown {sorted(unknown)}; known: "
                                 f"{sorted(known)}")
        if not self.alignments or set(self.alignments) - set(ALIGNMENTS):
            raise ValueError(f"Features.alignments must be some of {ALIGNMENTS}, got "
                             f"{self.alignments}")
        missing = {"q", "k", "v", *(("do",) if self.gradients else ())} - set(self.names)
        if missing:
            raise ValueError(f"Features.names must name the inputs {sorted(missing)}")
        if self.empty_rows not in EMPTY_ROWS:
            raise ValueError(f"Features.empty_rows must be one of {EMPTY_ROWS}, got "
                             f"{self.empty_rows!r}")
        if self.absent_dbias not in ABSENT_DBIAS:
            raise ValueError(f"Features.absent_dbias must be one of {ABSENT_DBIAS}, got "
                             f"{self.absent_dbias!r}")
        if self.takes("segments") and {"segment_ids_q", "segment_ids_kv"} - set(self.names):
            raise ValueError("Features.names must name segment_ids_q and segment_ids_kv of "
                             "a kernel taking segments")
        if self.shared_segments and (self.names.get("segment_ids_q")
                                     != self.names.get("segment_ids_kv")):
            raise ValueError("Features.shared_segments: names must give segment_ids_q and "
                             "segment_ids_kv the one input name")
        for name, value, known in (("segment_rows", self.segment_rows, SEGMENT_ROWS),
                                   ("streams", self.streams, STREAMS),
                                   ("precision_design", self.precision_design, DESIGNS)):
            if value not in known:
                raise ValueError(f"Features.{name} must be one of {known}, got {value!r}")
        missing = unmodelled(self.precision_design, bias=self.takes("bias"),
                             bias_before_scale=self.bias_before_scale,
                             soft_cap=self.takes("soft-cap"), sinks=self.takes("sinks"),
                             normalized=self.normalize != "none")
        if missing:
            raise ValueError(f"Features.precision_design={self.precision_design!r} does not "
                             f"model this kernel: {', '.join(missing)}; declare the plain "
                             "design (or leave those features out of optional)")
        if self.streams == "per-input" and (self.takes("bias") or self.takes("mask")):
            raise ValueError("Features.streams='per-input' gives q, k, v, the cotangent and "
                             "sinks their own streams, not a bias or a mask: a kernel taking "
                             "either draws from one stream")
        if self.takes("sinks") and "sinks" not in self.names:
            raise ValueError("Features.names must name the sinks input of a kernel taking sinks")
        if self.lse not in (None, *LSE_BASES):
            raise ValueError(f"Features.lse must be None or one of {LSE_BASES}, got "
                             f"{self.lse!r}")

    def takes(self, feature: str) -> bool:
        """Whether the kernel takes the optional ``feature`` at all."""
        return feature in self.optional

    def used(self, case: Any) -> set[str]:
        """The drawable features (:data:`FIELD_OF`) ``case`` turns on (another value head
        size where it differs)."""
        used = {f for f, field in FIELD_OF.items() if getattr(case, field) not in (None, False)}
        return used - ({"head-dim-v"} if case.value_dim == case.head_dim else set())

    def check(self, case: Any) -> None:
        """Raises, naming the field, unless the kernel takes what ``case`` uses."""
        for feature in sorted(self.used(case)):
            if not self.takes(feature):
                raise ValueError(f"{FIELD_OF[feature]}: this kernel takes no {feature} "
                                 f"(its optional features: {sorted(self.optional)})")
        for name in ("bias", "mask"):
            kind = getattr(case, name)
            if kind is not None and kind not in self.broadcasts:
                raise ValueError(f"{name}={kind!r}: this kernel takes the broadcasts "
                                 f"{self.broadcasts}")
        if case.alignment not in self.alignments:
            raise ValueError(f"alignment={case.alignment!r}: this kernel aligns causal and "
                             f"window masks {' or '.join(self.alignments)}")
        if case.kv_heads != case.q_heads and not self.takes("gqa"):
            raise ValueError("kv_heads: this kernel takes no grouped-query attention")
        if case.masks is not None and not self.static_masks:
            raise ValueError("masks: this kernel takes no static masks")
        if self.segment_rows == "shared" and case.q_segments is not None and (
                len(set(case.q_segments)) > 1 or len(set(case.kv_segments)) > 1):
            raise ValueError("q_segments, kv_segments: this kernel takes one segment layout for "
                             "every batch row")
        if self.shared_segments and case.q_segments != case.kv_segments:
            raise ValueError("q_segments, kv_segments: this kernel takes one segment-id array "
                             "for queries and keys, so the two layouts must be equal (and "
                             "q_len == kv_len)")
        if not self.query_axis and case.q_len != 1:
            raise ValueError(f"q_len: this kernel takes one query per row, got {case.q_len}")
        for name in ("kv_starts", "kv_lengths"):
            if isinstance(getattr(case, name), int) and not self.scalar_bounds:
                raise ValueError(f"{name}: this kernel takes one value per batch row, not a "
                                 "scalar")
        if self.causal_q_le_kv and case.is_causal and case.q_len > case.kv_len:
            raise ValueError(f"is_causal: this kernel's causal mask needs q_len <= kv_len "
                             f"(got {case.q_len} > {case.kv_len})")
        for group in self.exclusive:
            on = sorted(group & self.used(case))
            if len(on) > 1:
                raise ValueError(f"{' and '.join(FIELD_OF[f] for f in on)}: this kernel takes "
                                 "at most one of them in a call")

    def output(self, name: str) -> str:
        """The kernel's name of the op output ``name``."""
        return self.outputs.get(name, name)
