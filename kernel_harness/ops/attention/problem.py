"""The attention problem: one case description for every kernel that takes a full
``(q, k, v)`` call (sdpa, torch-sdpa and flash today), written once, with the one
exclusion rule.

A case is :class:`AttentionProblem`: the op's :class:`~.vocabulary.Shape`, the masking
options (top-left causal, local window, a random boolean mask with a broadcast shape,
query and key lengths, per-row segment layouts), an additive bias, the scale and the
logit scale. A kernel's case
type derives from it and adds only its own configuration (torch-sdpa's pinned torch
kernel); what the kernel takes of the problem and how it defines it is its
:class:`Features` declaration (:mod:`.features`), a class attribute of the case type.

The exclusion rule, stated once (:meth:`AttentionProblem.rows_outside`): a query row
that sees no key and is not a padding row is outside the contract unless the kernel
declares such rows zero (``Features.empty_rows``). ``valid``, the zeroed cotangent and the
``constrain`` hook all derive from it (:mod:`.record`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from kernel_harness.core.case import (
    Case,
    cast,
    check_logit_scale,
    check_sizes,
    standard_normal,
)
from kernel_harness.ops.attention.reference import visibility
from kernel_harness.ops.attention.segments import Runs, check_pair, check_rows, stacked_ids
from kernel_harness.ops.attention.vocabulary import Shape, head_axis, query_axis

#: Broadcast shapes of a bias or mask: full ``(B, N, T, S)``, shared over the batch
#: ``(1, N, T, S)``, shared over the heads ``(B, 1, T, S)``.
BROADCASTS: tuple[str, ...] = ("full", "batch-shared", "head-shared")
#: The masking options, by field: each changes which keys a row sees (``q_segments``
#: stands for the segment layouts, ``q_segments`` and ``kv_segments`` together).
MASKING = ("is_causal", "window", "mask", "kv_lengths", "kv_starts", "q_lengths", "q_segments")
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
class AttentionProblem(Shape, Case):
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
        if self.FEATURES is not None:
            self.FEATURES.check(self)

    @property
    def effective_scale(self) -> float:
        """The scale the call applies: ``scale``, else ``1/sqrt(head_dim)``."""
        return 1.0 / math.sqrt(self.head_dim) if self.scale is None else self.scale

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

    def broadcast_shape(self, kind: str) -> tuple[int, int, int, int]:
        """The 4-D shape of a bias or mask of broadcast ``kind``."""
        b = 1 if kind == "batch-shared" else self.batch
        n = 1 if kind == "head-shared" else self.q_heads
        return (b, n, self.q_len, self.kv_len)

    def mask_array(self) -> np.ndarray | None:
        """The boolean mask (from the seed's stream 1), or None."""
        if self.mask is None:
            return None
        m = self.rng(1).random(self.broadcast_shape(self.mask)) < self.mask_keep
        if self.empty_row:
            m[:, :, 0, :] = False
        return m

    def per_row(self, name: str) -> tuple[int, ...] | None:
        """The per-row values of ``q_lengths``, ``kv_lengths`` or ``kv_starts`` (a scalar
        bound repeated for every row), or None."""
        value = getattr(self, name)
        return (value,) * self.batch if isinstance(value, int) else value

    def segment_arrays(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(q ids [batch, q_len], kv ids [batch, kv_len])`` int32, or None."""
        if self.q_segments is None:
            return None
        return stacked_ids(self.q_segments), stacked_ids(self.kv_segments)

    def visible(self, *, without: str | None = None) -> np.ndarray:
        """``(batch, q_heads, q_len, kv_len)`` bool from the description; ``without`` names
        one masking field (:data:`MASKING`) to leave out."""
        def unless(option: str, value: Any) -> Any:
            return None if without == option else value

        vis = self.visibility(causal=self.is_causal and without != "is_causal",
                              window=unless("window", self.window),
                              mask=unless("mask", self.mask_array()),
                              q_lengths=unless("q_lengths", self.q_lengths),
                              kv_lengths=unless("kv_lengths", self.per_row("kv_lengths")),
                              kv_starts=unless("kv_starts", self.per_row("kv_starts")),
                              segments=unless("q_segments", self.segment_arrays()))
        return np.array(np.broadcast_to(vis, (self.batch, self.q_heads, self.q_len, self.kv_len)))

    def visibility(self, *, causal: bool, window: tuple[int, int] | None, mask: Any,
                   q_lengths: Any, kv_lengths: Any, segments: Any = None,
                   kv_starts: Any = None) -> np.ndarray:
        """bool, broadcastable to ``(batch, q_heads, q_len, kv_len)``: which key each query
        sees under these options, aligned as the case is (the one place the alignment
        meets the mask; the reference passes the mask, lengths, starts and segment ids its
        inputs hold; a scalar bound holds for every row)."""
        def rows(x: Any) -> Any:
            return None if x is None else np.broadcast_to(np.asarray(x), (self.batch,))

        kv_lengths, kv_starts = rows(kv_lengths), rows(kv_starts)
        return visibility(self.q_len, self.kv_len, causal=causal, window=window, mask=mask,
                          q_offset=self.q_offset(q_lengths, kv_lengths),
                          q_lengths=q_lengths, kv_lengths=kv_lengths, kv_starts=kv_starts,
                          segments=segments, xp=np)

    def q_offset(self, q: Any, kv: Any) -> Any:
        """The position of query row 0 among the keys (``visibility``'s ``q_offset``):
        0 top-left; bottom-right ``kv_len - q_len``, per batch row from the lengths ``q``
        and ``kv`` where given (None: the whole sequence)."""
        if self.alignment == "top-left":
            return 0
        if q is None and kv is None:
            return self.kv_len - self.q_len
        q = np.full(self.batch, self.q_len) if q is None else np.asarray(q)
        kv = np.full(self.batch, self.kv_len) if kv is None else np.asarray(kv)
        return (kv - q).astype(np.int32)

    def padding_rows(self) -> np.ndarray:
        """``(batch, q_len)`` bool: query rows at or past ``q_lengths``."""
        if self.q_lengths is None:
            return np.zeros((self.batch, self.q_len), bool)
        return np.arange(self.q_len)[None, :] >= np.asarray(self.q_lengths)[:, None]

    def rows_without_keys(self) -> np.ndarray:
        """``(batch, q_heads, q_len)`` bool: rows that see no key and are not padding rows."""
        return ~self.visible().any(-1) & ~self.padding_rows()[:, None, :]

    def rows_outside(self) -> np.ndarray:
        """``(batch, q_heads, q_len)`` bool: the rows outside the kernel's contract (the
        one exclusion rule): :meth:`rows_without_keys`, unless the kernel declares them
        zero (``Features.empty_rows``)."""
        rows = self.rows_without_keys()
        return rows if self.FEATURES.empty_rows == "outside" else np.zeros_like(rows)

    def rows_outside_in_layout(self) -> np.ndarray:
        """:meth:`rows_outside` as a mask broadcastable to q, out and do in the kernel's
        layout (``[..., 1]`` over head_dim)."""
        return self.in_layout(self.rows_outside())

    def in_layout(self, rows: np.ndarray) -> np.ndarray:
        """A ``(batch, q_heads, q_len)`` row mask broadcastable to q, out and do in the
        kernel's layout (``[..., 1]`` over head_dim; no query axis for a one-query kernel)."""
        if self.FEATURES.layout == "bqhd":
            rows = np.transpose(rows, (0, 2, 1))
        if not self.FEATURES.query_axis:
            rows = np.take(rows, 0, axis=query_axis(self.FEATURES.layout))
        return rows[..., None]

    def query_shape(self) -> tuple[int, ...]:
        """query's (and do's) shape in the kernel's layout (without the query axis for a
        kernel taking one query per row: ``Features.query_axis``)."""
        layout = self.FEATURES.layout
        head_axis(layout)
        shape = ((self.batch, self.q_len, self.q_heads, self.head_dim) if layout == "bqhd"
                 else (self.batch, self.q_heads, self.q_len, self.head_dim))
        if not self.FEATURES.query_axis:
            axis = query_axis(layout)
            shape = shape[:axis] + shape[axis + 1:]
        return shape

    def materialize(self) -> dict[str, np.ndarray]:
        """The kernel's inputs by its names (``Features.names``): query (standard normal
        times :attr:`q_scale`), key, value, the cotangent (zero on rows outside the
        contract; none for a forward-only kernel), then the bias, the boolean mask, int32
        lengths, starts and segment ids where on, drawn in that order and rounded to the
        case's dtype. A kernel that adds its bias before scaling
        (``Features.bias_before_scale``) gets standard normal over the scale, so that the
        scaled logits stay O(1)."""
        names, layout = self.FEATURES.names, self.FEATURES.layout
        rng = self.rng()
        kv = ((self.batch, self.kv_len, self.kv_heads, self.head_dim) if layout == "bqhd"
              else (self.batch, self.kv_heads, self.kv_len, self.head_dim))
        query = rng.standard_normal(self.query_shape()) * self.q_scale
        out = {names["q"]: cast(query, self.dtype),
               names["k"]: standard_normal(rng, kv, self.dtype),
               names["v"]: standard_normal(rng, kv, self.dtype)}
        if self.FEATURES.gradients:
            do = rng.standard_normal(self.query_shape())
            do[np.broadcast_to(self.rows_outside_in_layout(), do.shape)] = 0.0
            out[names["do"]] = cast(do, self.dtype)
        if self.bias is not None:
            bias = rng.standard_normal(self.broadcast_shape(self.bias))
            if self.FEATURES.bias_before_scale:
                bias = bias / self.effective_scale
            out[names["bias"]] = cast(bias, self.dtype)
        if self.mask is not None:
            out[names["mask"]] = self.mask_array()
        for field in ("q_lengths", "kv_lengths", "kv_starts"):
            if getattr(self, field) is not None:
                out[names[field]] = np.asarray(getattr(self, field), np.int32)
        segments = self.segment_arrays()
        if segments is not None:
            out[names["segment_ids_q"]], out[names["segment_ids_kv"]] = segments
        return out
