"""flywheel-tpu's ``flash_attn_varlen_func`` as a case of the attention problem: each batch
row is one packed sequence (its ``q_lengths``/``kv_lengths`` tokens; a row without them is
whole), causal and windows aligned bottom-right per sequence, GQA, bfloat16 only,
FlashAttention's precision design, the natural lse; forward only. A row that sees no key
(a causal or windowed sequence with more queries than keys) is unspecified by the library:
outside the contract. Its own configuration: the forward's ``block_sizes`` (or the
library's choice)."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import strategies as st

from kernel_harness.ops.attention.features import Features
from kernel_harness.ops.attention.problem import AttentionProblem

#: ``(block_q, block_kv, block_q_compute, block_kv_compute)`` the kernel accepts (block_q
#: and block_kv multiples of 128, at least two q compute tiles a block, kv compute tiles
#: multiples of 128 dividing block_kv); None: the library's tuned or analytic blocks.
BLOCKS: tuple[tuple[int, int, int, int] | None, ...] = (
    None, (128, 128, 64, 128), (128, 128, 32, 128), (256, 128, 128, 128),
    (128, 256, 64, 256), (256, 256, 64, 128))


@dataclasses.dataclass(frozen=True, kw_only=True)
class FlywheelVarlenCase(AttentionProblem):
    """One ``flash_attn_varlen_func`` call (forward, lse) over the problem's batch rows
    packed as sequences, with ``blocks`` as its ``block_sizes``."""

    blocks: tuple[int, int, int, int] | None = None

    FEATURES = Features(
        layout="bhqd",
        names={"q": "q", "k": "k", "v": "v", "q_lengths": "q_lengths",
               "kv_lengths": "kv_lengths"},
        optional=frozenset({"causal", "window", "scale", "gqa", "q-len-ne-kv-len",
                            "q-lengths", "kv-lengths"}),
        alignments=("bottom-right",),
        gradients=False,
        lse="natural",
        dtypes=("bfloat16",),
        calibrated=frozenset({"bfloat16"}),
        precision_design="flash",
        # 127/128/129: sequences ending on and next to the 128-token blocks (1: q_only).
        lengths=(128, 129, 127, 256),
        q_only_lengths=(1, 130),
        head_dims=(128, 64),
        max_batch=3,
        max_batch_heads=6,  # bounds interpret time
        kv_head_counts=(1, 2),
        groups=(1, 2),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.blocks not in BLOCKS:
            raise ValueError(f"blocks must be one of {BLOCKS}, got {self.blocks}")


def blocks(problem: AttentionProblem) -> st.SearchStrategy[dict[str, Any]]:
    """The forward's block sizes (a ``Config``): the library's own first (shrinks there);
    for a case that has blocks (a block variant), other blocks than its own."""
    own = getattr(problem, "blocks", ())
    return st.sampled_from([b for b in BLOCKS if b != own]).map(lambda b: {"blocks": b})


def block_events(case: FlywheelVarlenCase) -> list[str]:
    """Sequences of one token, sequences crossing a 128-token block, several sequences."""
    q = case.per_row("q_lengths") or (case.q_len,) * case.batch
    kv = case.per_row("kv_lengths") or (case.kv_len,) * case.batch
    ev = ["library-blocks" if case.blocks is None else "pinned-blocks"]
    if case.batch > 1:
        ev.append("several-sequences")
    if 1 in q or 1 in kv:
        ev.append("one-token-sequence")
    if any(n > 128 for n in (*q, *kv)):
        ev.append("sequence-past-128")
    return ev


def seed_cases(without: frozenset[str] = frozenset()) -> tuple[FlywheelVarlenCase, ...]:
    """Three causal GQA sequences of 1, 127 and 129 queries over 128, 129 and 129 keys
    (a one-token sequence, sequences ending next to the 128-token block edge, packed so
    that the second and third start inside a block); then two non-causal MQA sequences at
    16x logits whose key ends share a block with the next sequence's keys."""
    full = "q-lengths" in without or "kv-lengths" in without
    common = dict(dtype="bfloat16", kv_heads=2, head_dim=128, alignment="bottom-right",
                  q_lengths=None if full else (1, 127, 129))
    return (FlywheelVarlenCase(
        seed=3, batch=3, q_heads=4 if "gqa" not in without else 2, q_len=129, kv_len=129,
        is_causal="causal" not in without, kv_lengths=None if full else (128, 129, 129),
        **common),
        FlywheelVarlenCase(**{**common, "kv_heads": 1 if "gqa" not in without else 2,
                              "q_lengths": None}, seed=4, batch=2, q_heads=2,
                           q_len=129 if "q-len-ne-kv-len" in without else 127,
                           kv_len=129, logit_scale=16.0,
                           kv_lengths=None if full else (100, 129)))
