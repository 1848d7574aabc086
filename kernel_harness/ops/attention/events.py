"""Coverage labels every attention kernel reports the same way: one fact, one label, in
every family of the op (``length-1-segment``, never ``segment-len-1``; ``q-len<kv-len`` and
``q-len>kv-len``, never ``q-len!=kv-len``)."""

from __future__ import annotations

from collections.abc import Sequence

from kernel_harness.ops.attention.masks import NUMPY_KINDS, parse_mask
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
    see each other), more than one id."""
    ev = []
    rows = [*q_runs, *kv_runs]
    if any(n == 1 for row in rows for _, n in row):
        ev.append("length-1-segment")
    if any(len({i for i, _ in row}) < len(row) for row in rows):
        ev.append("repeated-segment-id")
    if any([i for i, _ in row] != sorted(i for i, _ in row) for row in q_runs):
        ev.append("unsorted-segments")
    if len({i for row in rows for i, _ in row}) > 1:
        ev.append("several-segments")
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
