"""Coverage labels every attention kernel reports the same way: one fact, one label, in
every family of the op (``length-1-segment``, never ``segment-len-1``; ``q-len<kv-len`` and
``q-len>kv-len``, never ``q-len!=kv-len``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kernel_harness.ops.attention.masks import LEAF_KINDS, NUMPY_KINDS, parse_mask
from kernel_harness.ops.attention.vocabulary import Shape

Runs = Sequence[Sequence[tuple[int, int]]]

#: Labels once written for facts that have one label now (old -> today's): stored
#: coverage and fingerprints read through it. ``q-len-ne-kv-len`` is today's
#: ``q-len<kv-len`` or ``q-len>kv-len``, whichever holds.
RENAMED: dict[str, str] = {
    "fully-masked-rows": "rows-without-keys",
    "empty-row": "rows-without-keys",
    "bf16": "bfloat16",
    "f32": "float32",
    "bwd-blocks!=fwd-blocks": "bwd-blocks-differ",
    **{f"dtype:{d}": d for d in ("float32", "bfloat16", "float16")},
}
#: Renames of one family's labels whose old spelling another family still uses for a fact
#: of its own (fused-moe's ``bias``, hstu's ``sm-scale``): family -> {old -> today's}.
#: flash's ``sm-scale`` said ``sm_scale != 1``; on the problem every stored flash case has
#: an explicit scale, so one stored with ``sm_scale=1.0`` now says ``explicit-scale`` too.
RENAMED_IN: dict[str, dict[str, str]] = {
    "flash": {"bias": "bias-full", "sm-scale": "explicit-scale"},
    # gpu-mha's only explicit scale is 1.0 (q pre-scaled); "scale-arg" was the default.
    "gpu-mha": {"full": "non-causal", "scale-prescaled-q": "explicit-scale"},
    # A start or end bound is given (kv-starts, kv-lengths), in the scalar form or not.
    "gpu-decode": {"scale-prescaled-q": "explicit-scale", "start-per-row": "kv-starts",
                   "end-per-row": "kv-lengths", "start-scalar": "scalar-kv-starts",
                   "end-scalar": "scalar-kv-lengths"},
}


def logits_label(logit_scale: float) -> str:
    """The label of a case's logit scale, e.g. ``logits-16x``."""
    return f"logits-{logit_scale:g}x"


def sharing_events(shape: Shape) -> list[str]:
    """``gqa`` or ``mqa`` when query heads share kv heads (nothing for MHA)."""
    return [] if shape.sharing == "mha" else [shape.sharing]


def length_events(q_len: int, kv_len: int) -> list[str]:
    """``q-len<kv-len`` / ``q-len>kv-len`` when the lengths differ."""
    if q_len == kv_len:
        return []
    return ["q-len<kv-len" if q_len < kv_len else "q-len>kv-len"]


def segment_events(q_runs: Runs, kv_runs: Runs) -> list[str]:
    """Labels of segment-id layouts given as per-row ``(id, length)`` runs: a length-1
    segment, query ids out of order, an id given to two runs of one row (rows apart that
    see each other), more than one id, query and key layouts that differ."""
    ev = ["cross-segments"] if tuple(q_runs) != tuple(kv_runs) else []
    rows = [*q_runs, *kv_runs]
    if any(n == 1 for row in rows for _, n in row):
        ev.append("length-1-segment")
    if any(len({i for i, _ in row}) < len(row) for row in rows):
        ev.append("repeated-segment-id")
    if any([i for i, _ in row] != sorted(i for i, _ in row) for row in q_runs):
        ev.append("unsorted-segments")
    if len({i for row in rows for i, _ in row}) > 1:
        ev.append("several-segments")
    if any(i > 255 for row in rows for i, _ in row):  # past what 8 bits of an id keep
        ev.append("segment-id>255")
    return ev


#: A window side this close to a multiple of 128 (the lanes kernels tile keys by) sits on
#: a block edge: ``window-edge``.
_EDGE_RESIDUES = (0, 1, 127)


def mask_events(head_masks: Sequence[str]) -> list[str]:
    """Labels of per-head masks in the op's mask language (:mod:`.masks`): masks that
    differ by head, each expression's and leaf's kind (``mask:local``), a local window and
    one on a block edge, a numpy mask."""
    ev = ["per-head-masks"] if len(set(head_masks)) > 1 else []
    for expr in (parse_mask(s) for s in head_masks):
        ev.append(f"mask:{expr.kind}")
        for leaf in expr.leaves():
            ev.append(f"mask:{leaf.kind}")
            if leaf.kind == "local":
                ev.append("window")
                sides = [leaf.param("left"), leaf.param("right")]
                if any(s is not None and s % 128 in _EDGE_RESIDUES for s in sides):
                    ev.append("window-edge")
            if leaf.kind in NUMPY_KINDS or expr.kind == "numpy":
                ev.append("numpy-mask")
    return ev


#: Every label of a fact of the attention problem (:func:`events`): one fact, one label,
#: in every family of the op (a kernel's own configuration labels itself apart).
LABELS: frozenset[str] = frozenset({
    "float32", "bfloat16", "float16", "gqa", "mqa", "q-len<kv-len", "q-len>kv-len", "causal",
    "explicit-scale", "window", "window-left-only", "kv-lengths", "q-lengths", "padding-rows",
    "rows-without-keys", "bottom-right", "segments", "length-1-segment", "unsorted-segments",
    "several-segments", "repeated-segment-id", "cross-segments", "segment-id>255",
    "kv-starts",
    "scalar-kv-starts", "scalar-kv-lengths", "soft-cap", "sinks", "head-dim-v!=head-dim",
    "per-head-masks", "window-edge", "numpy-mask",
    *(f"mask:{kind}" for kind in (*LEAF_KINDS, "and", "or", "numpy")),
    *(f"{what}-{kind}" for what in ("bias", "mask")
      for kind in ("full", "batch-shared", "head-shared")),
})


def events(case: Any) -> list[str]:
    """The problem's labels (:data:`LABELS` and :func:`logits_label`) of an
    :class:`~.problem.AttentionProblem`: dtype, head sharing, unequal lengths, each option
    on, the static masks' kinds (:func:`mask_events`), the segment layouts' shapes
    (:func:`segment_events`), padding rows, rows that see no key."""
    lengths = length_events(case.q_len, case.kv_len) if case.FEATURES.query_axis else []
    ev = [case.dtype, *sharing_events(case), *lengths]
    if case.is_causal:
        ev.append("causal")
    if case.bias is not None:
        ev.append(f"bias-{case.bias}")
    if case.mask is not None:
        ev.append(f"mask-{case.mask}")
    if case.alignment == "bottom-right":
        ev.append("bottom-right")
    if case.scale is not None:
        ev.append("explicit-scale")
    if case.window is not None:
        ev.append("window" if case.window[1] else "window-left-only")
    for name, label in (("kv_lengths", "kv-lengths"), ("kv_starts", "kv-starts")):
        value = getattr(case, name)
        if value is not None:
            ev += [label, *([f"scalar-{label}"] if isinstance(value, int) else [])]
    if case.q_lengths is not None:
        ev.append("q-lengths")
        if case.padding_rows().any():
            ev.append("padding-rows")
    if case.FEATURES.static_masks:
        ev += mask_events(case.head_masks())
    if case.q_segments is not None:
        ev += ["segments", *segment_events(case.q_segments, case.kv_segments)]
    for on, label in ((case.soft_cap is not None, "soft-cap"), (case.sinks, "sinks"),
                      (case.value_dim != case.head_dim, "head-dim-v!=head-dim")):
        if on:
            ev.append(label)
    if case.rows_without_keys().any():
        ev.append("rows-without-keys")
    ev.append(logits_label(case.logit_scale))
    return list(dict.fromkeys(ev))  # each label once (static masks repeat theirs by head)
