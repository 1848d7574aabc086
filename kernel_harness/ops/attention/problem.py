"""The attention problem: one case description for every kernel that takes a full
``(q, k, v)`` call (every attention family: tests/test_attention_families_architecture.py),
written once.

A case is :class:`AttentionProblem`: the op's :class:`~.vocabulary.Shape`, the masking
options (causal, local window, a random boolean mask with a broadcast shape, static masks
in the op's mask language, query and key lengths and starts, segment layouts), an additive
bias, a soft cap, sinks, the value head size, the scale and the logit scale. A kernel's
case type derives from it and adds only its own configuration (its blocks, torch-sdpa's
pinned torch kernel); what the kernel takes of the problem and how it defines it is its
:class:`Features` declaration (:mod:`.features`), a class attribute of the case type.
What the description means as arrays (visibility, the one exclusion rule, the inputs) is
:mod:`.arrays`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from kernel_harness.core.case import Case, check_logit_scale, check_sizes
from kernel_harness.ops.attention.arrays import ProblemArrays
from kernel_harness.ops.attention.masks import parse_mask
from kernel_harness.ops.attention.segments import Runs, check_pair, check_rows
from kernel_harness.ops.attention.vocabulary import Shape

#: Broadcast shapes of a bias or mask: full ``(B, N, T, S)``, shared over the batch
#: ``(1, N, T, S)``, shared over the heads ``(B, 1, T, S)``.
BROADCASTS: tuple[str, ...] = ("full", "batch-shared", "head-shared")
#: The masking options, by field: each changes which keys a row sees (``q_segments``
#: stands for the segment layouts, ``q_segments`` and ``kv_segments`` together).
MASKING = ("is_causal", "window", "mask", "kv_lengths", "kv_starts", "q_lengths", "q_segments",
           "masks")
#: Fields that are data, not program: a compiled call is selected by their presence (and a
#: bound's form: one scalar for every row, or one value per row) only.
_BY_PRESENCE = ("q_lengths", "kv_lengths", "kv_starts", "q_segments", "kv_segments")
#: Per-row key bounds a kernel may take as one scalar for every row (``Features.
#: scalar_bounds``).
BOUNDS = ("kv_starts", "kv_lengths")
#: Where query row i sits among the keys for causal and window masks: ``top-left`` (at
#: position i: jax.nn, torch, splash) or ``bottom-right`` (at i + kv_len - q_len, each
#: sequence's own lengths where given: flash-attn and the libraries following it).
ALIGNMENTS: tuple[str, ...] = ("top-left", "bottom-right")


@dataclasses.dataclass(frozen=True, kw_only=True)
class AttentionProblem(ProblemArrays, Shape, Case):
    """One attention call and its vjp, in the op's vocabulary.

    Attributes:
      batch, q_heads, kv_heads, q_len, kv_len, head_dim: the op's :class:`~.vocabulary.
        Shape` (fewer kv heads: grouped-query attention, one: multi-query).
      is_causal: top-left causal mask (query i sees key j <= i).
      mask: None or the broadcast shape (:data:`BROADCASTS`) of a random boolean mask
        (True = attend).
      mask_keep: probability that a mask element is True.
      scale: explicit scale, or None for the default ``1/sqrt(head_dim)``.
      logit_scale: multiple of the O(1) logit scale: q is drawn so that the logits
        (``scale * q.k``) are ~N(0, logit_scale**2); see ``core.case.LOGIT_SCALES``.
      bias: None or the broadcast shape of an additive bias.
      window: ``(left, right)`` local window (``i - left <= j <= i + right``), or None.
      q_lengths, kv_lengths: per batch row, the query rows (the rest are padding rows)
        and the keys that count (key j counts while ``j < kv_lengths``: an end index).
      kv_starts: per batch row, the first key that counts (keys before it are unseen).
        ``kv_starts`` and ``kv_lengths`` may be one int for every row where the kernel
        takes them as a scalar (``Features.scalar_bounds``).
      empty_row: the mask's query row 0 sees no key.
      alignment: where causal and window masks put the query rows (:data:`ALIGNMENTS`).
      q_segments, kv_segments: per batch row, the segment layout of the queries and the
        keys as ``(id, length)`` runs (:mod:`.segments`); both None or both given. Query i
        sees key j only where their ids are equal.
      masks: static masks in the op's mask language (:mod:`.masks`): one expression for
        every query head, or one per head; None: none.
      soft_cap: logits capped as ``soft_cap * tanh(s / soft_cap)`` (before masking), or
        None.
      sinks: one learned sink logit per query head, which takes probability mass and has no
        value (a row that sees no key is then defined: out 0, lse the sink).
      head_dim_v: the value (and output) head size, or None: ``head_dim``.
    """

    is_causal: bool = False
    mask: str | None = None
    mask_keep: float = 0.7
    scale: float | None = None
    logit_scale: float = 1.0
    bias: str | None = None
    window: tuple[int, int] | None = None
    q_lengths: tuple[int, ...] | None = None
    kv_lengths: tuple[int, ...] | int | None = None
    kv_starts: tuple[int, ...] | int | None = None
    empty_row: bool = False
    alignment: str = "top-left"
    q_segments: tuple[Runs, ...] | None = None
    kv_segments: tuple[Runs, ...] | None = None
    masks: tuple[str, ...] | None = None
    soft_cap: float | None = None
    sinks: bool = False
    head_dim_v: int | None = None

    # Class attributes, not annotated: Hypothesis prints a dataclass's ClassVars as fields.
    # FEATURES: what the kernel takes of the problem (a :class:`~.features.Features`,
    # set by each kernel's case type).
    FEATURES = None
    DYNAMIC_FIELDS = frozenset({"seed", "logit_scale", "mask_keep", "empty_row"})

    def __post_init__(self) -> None:
        super().__post_init__()
        check_logit_scale(self.logit_scale)
        check_sizes(self, "batch", "q_len", "kv_len", "head_dim")
        if not 0.0 < self.mask_keep <= 1.0:
            raise ValueError(f"mask_keep must be in (0, 1], got {self.mask_keep}")
        if self.scale is not None and not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"scale must be positive and finite, got {self.scale}")
        for name in ("bias", "mask"):
            if getattr(self, name) not in (None, *BROADCASTS):
                raise ValueError(f"{name} must be None or one of {BROADCASTS}, got "
                                 f"{getattr(self, name)!r}")
        if self.window is not None and (len(self.window) != 2 or min(self.window) < 0):
            raise ValueError(f"window must be (left >= 0, right >= 0), got {self.window}")
        for name, length in (("q_lengths", self.q_len), ("kv_lengths", self.kv_len),
                             ("kv_starts", self.kv_len)):
            lengths = getattr(self, name)
            if isinstance(lengths, int) and name in BOUNDS:
                lengths = (lengths,) * self.batch
            if lengths is not None and (
                len(lengths) != self.batch or not all(0 <= n <= length for n in lengths)
            ):
                raise ValueError(f"{name} must be {self.batch} values in [0, {length}]")
        if self.alignment not in ALIGNMENTS:
            raise ValueError(f"alignment must be one of {ALIGNMENTS}, got {self.alignment!r}")
        if self.empty_row and self.mask is None:
            raise ValueError("empty_row needs a mask")
        check_pair(self.q_segments, self.kv_segments)
        if self.q_segments is not None:
            check_rows("q_segments", self.q_segments, self.batch, self.q_len)
            check_rows("kv_segments", self.kv_segments, self.batch, self.kv_len)
        if self.masks is not None:
            if len(self.masks) not in (1, self.q_heads):
                raise ValueError(f"masks: give 1 or q_heads={self.q_heads} expressions, got "
                                 f"{len(self.masks)}")
            for spec in self.masks:
                parse_mask(spec)
        if self.soft_cap is not None and not (math.isfinite(self.soft_cap) and self.soft_cap > 0):
            raise ValueError(f"soft_cap must be positive and finite or None, got {self.soft_cap}")
        if self.head_dim_v is not None and self.head_dim_v < 1:
            raise ValueError(f"head_dim_v must be >= 1 or None, got {self.head_dim_v}")
        if self.FEATURES is not None:
            self.FEATURES.check(self)

    @property
    def effective_scale(self) -> float:
        """The scale the call applies: ``scale``, else the kernel's fixed scale
        (``Features.fixed_scale``: 1.0 for a kernel taking q pre-scaled), else
        ``1/sqrt(head_dim)``."""
        if self.scale is not None:
            return self.scale
        fixed = self.FEATURES.fixed_scale if self.FEATURES is not None else None
        return 1.0 / math.sqrt(self.head_dim) if fixed is None else fixed

    @property
    def value_dim(self) -> int:
        """The value and output head size: ``head_dim_v``, else ``head_dim``."""
        return self.head_dim if self.head_dim_v is None else self.head_dim_v

    def definition_options(self) -> dict[str, Any]:
        """Options of the kernel's :class:`~.program.Definition` that its configuration
        sets (a kernel's case type overrides this: gpu-decode's unnormalized output); by
        default none."""
        return {}

    @property
    def q_scale(self) -> float:
        """What standard-normal queries are multiplied by so that ``scale * q.k`` is
        ~N(0, logit_scale**2) whatever the scale is."""
        return self.logit_scale / (math.sqrt(self.head_dim) * self.effective_scale)

    def static_key(self) -> tuple[object, ...]:
        """What selects a compiled program: every field but the data (seed, the mask's
        values, the lengths' values, the segment layouts, the logit scale); the lengths and
        segment layouts by their presence."""
        def presence(value: Any) -> bool | str:
            return "scalar" if isinstance(value, int) else value is not None

        return tuple(
            (f.name, presence(getattr(self, f.name))
             if f.name in _BY_PRESENCE else getattr(self, f.name))
            for f in dataclasses.fields(self) if f.name not in self.DYNAMIC_FIELDS)

    def shape_summary(self) -> str:
        """``q=(2,128,4,64) kv=(256,2) causal window=(8,0) bias=full``, in the kernel's
        layout, then its configuration."""
        q = self.query_shape()
        kv = ((self.kv_len, self.kv_heads) if self.FEATURES.layout == "bqhd"
              else (self.kv_heads, self.kv_len))
        parts = [f"q={q} kv={kv}"]
        if self.is_causal:
            parts.append("causal")
        for name in ("bias", "mask", "window", "scale", "q_lengths", "kv_lengths", "kv_starts"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}={value}")
        if self.q_segments is not None:
            parts.append("segments")
        if self.masks is not None:
            parts.append(f"masks={'/'.join(self.masks)}")
        for name in ("soft_cap", "head_dim_v"):
            if getattr(self, name) is not None:
                parts.append(f"{name}={getattr(self, name)}")
        if self.sinks:
            parts.append("sinks")
        if self.empty_row:
            parts.append("empty-row")
        if self.alignment != "top-left":
            parts.append(self.alignment)
        parts += [f"{k}={v}" for k, v in self.config().items()]
        if self.logit_scale != 1.0:
            parts.append(f"logits={self.logit_scale:g}x")
        return " ".join(str(p).replace(" ", "") for p in parts)

    def config(self) -> dict[str, Any]:
        """The kernel's own fields (its configuration), by name."""
        own = {f.name for f in dataclasses.fields(AttentionProblem)}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in own}
