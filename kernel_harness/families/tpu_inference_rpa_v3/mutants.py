"""Mutant catalog for tpu-inference-rpa-v3: bugs planted in tpu-inference's ragged paged
attention v3 source (``kernel_harness.records.mutant``; ``kernel-harness mutate``)."""

from __future__ import annotations

from kernel_harness.families.tpu_inference.mutants import tpu_inference_edits
from kernel_harness.records.mutant import CI, Mutant

_kernel = tpu_inference_edits("ragged_paged_attention.v3.kernel")

#: CI kills the two ``ci`` ones (the mask and the cache path); the nightly kill matrix all.
MUTANTS: list[Mutant] = [
    _kernel("causal-excludes-diagonal", "a query no longer sees its own key",
            "mask = mask_and(mask, q_span >= k_span)",
            "mask = mask_and(mask, q_span > k_span)", tags=CI),
    _kernel("window-one-key-too-many", "the sliding window lets in one key past its edge",
            "mask = mask_and(mask, q_span < k_span + sliding_window)",
            "mask = mask_and(mask, q_span <= k_span + sliding_window)"),
    _kernel("softmax-sum-not-rescaled",
            "the running softmax sum is not rescaled when the running max grows",
            "l_ref[...] = exp_m_diff * l_prev + p_rowsum",
            "l_ref[...] = l_prev + p_rowsum"),
    _kernel("last-new-token-read-from-cache",
            "one token fewer is taken from the new K/V: the cache's stale slot is read for "
            "the first new token",
            "kv_left_frm_cache = jnp.maximum(kv_left - q_len, 0)",
            "kv_left_frm_cache = jnp.maximum(kv_left - q_len + 1, 0)", tags=CI),
    _kernel("window-skips-a-needed-kv-block",
            "with a window, the first kv block of a query block is skipped one block "
            "too early",
            "jnp.maximum(processed_q_len - sliding_window, 0) // bkv_sz)",
            "jnp.maximum(processed_q_len - sliding_window + bkv_sz, 0) // bkv_sz)"),
    _kernel("soft-cap-dropped", "the logit soft cap is never applied",
            "s = soft_cap * jnp.tanh(s / soft_cap)", "s = s"),
    _kernel("accumulator-not-rescaled",
            "the running output is not rescaled when the running max grows",
            "o_ref[...] = broadcast_minor(exp_m_diff, o_prev.shape) * o_prev + pv",
            "o_ref[...] = o_prev + pv"),
]
