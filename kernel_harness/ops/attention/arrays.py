"""What an attention case's description means as arrays: which key each query row sees,
the one exclusion rule, and the kernel's inputs (:class:`ProblemArrays`, a base of
:class:`~.problem.AttentionProblem`; the description and its checks are in
:mod:`.problem`).

The exclusion rule, stated once (:meth:`ProblemArrays.rows_outside`): a query row that sees
no key and is not a padding row is outside the contract, unless the kernel declares such
rows zero (``Features.empty_rows``) or the case has sinks (a sink is a logit every row
sees: such a row's output is 0 and its lse the sink's). ``valid``, the zeroed cotangent and
the ``constrain`` hook all derive from it (:mod:`.problem_hooks`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernel_harness.core.case import cast, standard_normal
from kernel_harness.ops.attention.masks import visible_keys
from kernel_harness.ops.attention.reference import visibility
from kernel_harness.ops.attention.segments import stacked_ids
from kernel_harness.ops.attention.vocabulary import query_axis

#: Where each input comes from with ``Features.streams == "per-input"``: its own random
#: stream of the case's seed (the mask, where drawn, keeps stream 1 in either form).
STREAMS: dict[str, int] = {"q": 0, "k": 1, "v": 2, "do": 3, "sinks": 4}
#: Sink logits are drawn around a row's logsumexp (the log of 1..512 keys), so that a sink
#: takes a share of every row's mass that matters.
SINK_RANGE: tuple[float, float] = (-2.0, 6.0)


class ProblemArrays:
    """The arrays of an :class:`~.problem.AttentionProblem` (a base of it: the fields and
    the ``FEATURES`` it reads are the problem's)."""

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

    def head_masks(self) -> tuple[str, ...] | None:
        """The static mask expression of every query head (``masks``: one for every head,
        or one per head; ``full`` for every head of a kernel taking static masks where the
        case gives none), or None."""
        if self.masks is None:
            return ("full",) * self.q_heads if self.FEATURES.static_masks else None
        return self.masks * self.q_heads if len(self.masks) == 1 else self.masks

    def static_visible(self) -> np.ndarray | None:
        """``[q_heads, q_len, kv_len]`` bool of the static masks (:mod:`.masks`), or None."""
        masks = self.head_masks()
        return None if masks is None else visible_keys((masks, self.q_len, self.kv_len,
                                                        None, None))

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
        one masking field (:data:`~.problem.MASKING`) to leave out."""
        def unless(option: str, value: Any) -> Any:
            return None if without == option else value

        vis = self.visibility(causal=self.is_causal and without != "is_causal",
                              window=unless("window", self.window),
                              mask=unless("mask", self.mask_array()),
                              q_lengths=unless("q_lengths", self.q_lengths),
                              kv_lengths=unless("kv_lengths", self.per_row("kv_lengths")),
                              kv_starts=unless("kv_starts", self.per_row("kv_starts")),
                              segments=unless("q_segments", self.segment_arrays()),
                              static=without != "masks")
        return np.array(np.broadcast_to(vis, (self.batch, self.q_heads, self.q_len, self.kv_len)))

    def visibility(self, *, causal: bool, window: tuple[int, int] | None, mask: Any,
                   q_lengths: Any, kv_lengths: Any, segments: Any = None,
                   kv_starts: Any = None, static: bool = True) -> np.ndarray:
        """bool, broadcastable to ``(batch, q_heads, q_len, kv_len)``: which key each query
        sees under these options, aligned as the case is (the one place the alignment
        meets the mask; the reference passes the mask, lengths, starts and segment ids its
        inputs hold; a scalar bound holds for every row), and the static masks unless not
        ``static``."""
        def rows(x: Any) -> Any:
            return None if x is None else np.broadcast_to(np.asarray(x), (self.batch,))

        kv_lengths, kv_starts = rows(kv_lengths), rows(kv_starts)
        if segments is not None:  # one layout for every batch row: ids without a batch axis
            segments = tuple(np.atleast_2d(ids) for ids in segments)
        vis = visibility(self.q_len, self.kv_len, causal=causal, window=window, mask=mask,
                         q_offset=self.q_offset(q_lengths, kv_lengths),
                         q_lengths=q_lengths, kv_lengths=kv_lengths, kv_starts=kv_starts,
                         segments=segments, xp=np)
        heads = self.static_visible() if static else None
        return vis if heads is None else vis & heads[None]

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
        """``(batch, q_heads, q_len)`` bool: rows that see no key and are not padding rows
        (a sink is not a key)."""
        return ~self.visible().any(-1) & ~self.padding_rows()[:, None, :]

    def keyless_lse_rows(self) -> np.ndarray:
        """``(batch, q_heads, q_len)`` bool: rows whose log-sum-exp is -inf (no key and no
        sink; padding rows see no key)."""
        rows = self.rows_without_keys() | self.padding_rows()[:, None, :]
        return np.zeros_like(rows) if self.sinks else rows

    def rows_outside(self) -> np.ndarray:
        """``(batch, q_heads, q_len)`` bool: the rows outside the kernel's contract (the
        one exclusion rule): :meth:`rows_without_keys`, unless the kernel declares them
        zero (``Features.empty_rows``) or the case has sinks."""
        rows = self.rows_without_keys()
        defined = self.FEATURES.empty_rows != "outside" or self.sinks
        return np.zeros_like(rows) if defined else rows

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

    def query_shape(self, dim: int | None = None) -> tuple[int, ...]:
        """query's shape in the kernel's layout (without the query axis for a kernel taking
        one query per row: ``Features.query_axis``); with ``dim``, the same rows of that
        width (out and do: the value head size)."""
        layout = self.FEATURES.layout
        d = self.head_dim if dim is None else dim
        shape = ((self.batch, self.q_len, self.q_heads, d) if layout == "bqhd"
                 else (self.batch, self.q_heads, self.q_len, d))
        if not self.FEATURES.query_axis:
            axis = query_axis(layout)
            shape = shape[:axis] + shape[axis + 1:]
        return shape

    def key_shape(self, dim: int) -> tuple[int, ...]:
        """k's (``dim``: head_dim) or v's (the value head size) shape in the kernel's
        layout."""
        return ((self.batch, self.kv_len, self.kv_heads, dim) if self.FEATURES.layout == "bqhd"
                else (self.batch, self.kv_heads, self.kv_len, dim))

    def materialize(self) -> dict[str, np.ndarray]:
        """The kernel's inputs by its names (``Features.names``): query (standard normal
        times :attr:`q_scale`), key, value, the cotangent (zero on rows outside the
        contract; none for a forward-only kernel), then the bias, the boolean mask, int32
        lengths, starts and segment ids where on, and sink logits (uniform in
        :data:`SINK_RANGE`, float32), drawn in that order from one stream of the seed (or
        each from its own: ``Features.streams``) and rounded to the case's dtype. A kernel
        that adds its bias before scaling (``Features.bias_before_scale``) gets standard
        normal over the scale, so that the scaled logits stay O(1); one taking one segment
        layout for every batch row (``Features.segment_rows``) gets ids without a batch
        axis."""
        f = self.FEATURES
        names, one = f.names, self.rng()

        def rng(name: str) -> np.random.Generator:
            return self.rng(STREAMS[name]) if f.streams == "per-input" else one

        dv = self.value_dim
        query = rng("q").standard_normal(self.query_shape()) * self.q_scale
        out = {names["q"]: cast(query, self.dtype),
               names["k"]: standard_normal(rng("k"), self.key_shape(self.head_dim), self.dtype),
               names["v"]: standard_normal(rng("v"), self.key_shape(dv), self.dtype)}
        if f.gradients:
            do = rng("do").standard_normal(self.query_shape(dv))
            do[np.broadcast_to(self.rows_outside_in_layout(), do.shape)] = 0.0
            out[names["do"]] = cast(do, self.dtype)
        if self.bias is not None:
            bias = one.standard_normal(self.broadcast_shape(self.bias))
            if f.bias_before_scale:
                bias = bias / self.effective_scale
            out[names["bias"]] = cast(bias, self.dtype)
        if self.mask is not None:
            out[names["mask"]] = self.mask_array()
        for field in ("q_lengths", "kv_lengths", "kv_starts"):
            if getattr(self, field) is not None:
                out[names[field]] = np.asarray(getattr(self, field), np.int32)
        segments = self.segment_arrays()
        if segments is not None:
            if f.segment_rows == "shared":
                segments = tuple(ids[0] for ids in segments)
            out[names["segment_ids_q"]], out[names["segment_ids_kv"]] = segments
        if self.sinks:
            out[names["sinks"]] = rng("sinks").uniform(*SINK_RANGE, self.q_heads).astype(
                np.float32)
        return out
