"""flywheel-tpu's ``flash_attn_func`` as a case of the attention problem: bfloat16 only,
heads first, causal aligned bottom-right (flash-attn's convention), GQA,
FlashAttention's precision design, and rows that see no key (causal with more queries than
keys) defined as zero. Keys come in multiples of 128 (the kernel is dense-only: a padded key
tail without a right bound at the diagonal would be attended); queries need not."""

from __future__ import annotations

import dataclasses

from kernel_harness.ops.attention.features import Features
from kernel_harness.ops.attention.problem import AttentionProblem


@dataclasses.dataclass(frozen=True, kw_only=True)
class FlywheelFlashCase(AttentionProblem):
    """One ``flash_attn_func`` call and its vjp: the attention problem only (the library
    picks its own blocks)."""

    FEATURES = Features(
        layout="bhqd",
        names={"q": "q", "k": "k", "v": "v", "do": "do"},
        # Windows: the library's backward refuses window_size (forward-only there).
        optional=frozenset({"causal", "scale", "gqa", "q-len-ne-kv-len"}),
        alignments=("bottom-right",),
        empty_rows="zero",
        dtypes=("bfloat16",),
        calibrated=frozenset({"bfloat16"}),
        precision_design="flash",
        # The backward takes D = rowsum(dO * O) from its rounded output: a key one query
        # sees has dS = 0 exactly in the reference, not in the kernel.
        magnitudes=("dq", "dk"),
        lengths=(128, 256),
        q_only_lengths=(64, 192),
        head_dims=(128, 64),
        max_batch=2,
        max_batch_heads=4,  # bounds interpret time
        kv_head_counts=(1, 2),
        groups=(1, 2),
    )
