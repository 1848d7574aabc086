"""Mutant catalog for tpu-inference-rpa-v3-hd64: bugs planted in tpu-inference's ragged
paged attention v3 head_dim-64 source (``kernel_harness.records.mutant``; ``kernel-harness
mutate``)."""

from __future__ import annotations

from kernel_harness.families.tpu_inference.mutants import tpu_inference_edits
from kernel_harness.records.mutant import CI, Mutant

_kernel = tpu_inference_edits("ragged_paged_attention.v3.kernel_hd64")

#: CI kills the two ``ci`` ones (the sinks and the cache path); the nightly kill matrix all.
MUTANTS: list[Mutant] = [
    _kernel("causal-excludes-diagonal", "a query no longer sees its own key",
            "mask = k_span <= q_span", "mask = k_span < q_span"),
    _kernel("window-one-key-too-many", "the sliding window lets in one key past its edge",
            "q_span - sliding_window < k_span", "q_span - sliding_window <= k_span"),
    _kernel("sink-weight-dropped",
            "the sink's logit seeds the running max but its weight (exp(sink - m)) is not "
            "counted in the softmax sum", "l_prev = load_with_init(head_l_ref, 1.0)",
            "l_prev = load_with_init(head_l_ref, 0.0)", tags=CI),
    _kernel("softmax-sum-not-rescaled",
            "the running softmax sum is not rescaled when the running max grows",
            "l_curr = exp_m_diff * l_prev + p_rowsum", "l_curr = l_prev + p_rowsum"),
    _kernel("soft-cap-dropped", "the logit soft cap is never applied",
            "s = soft_cap * jnp.tanh(s / soft_cap)", "s = s"),
    _kernel("last-new-token-read-from-cache",
            "one token fewer is taken from the new K/V: the cache's stale slot is read for "
            "the first new token",
            "kv_left_frm_cache = jnp.maximum(kv_left - q_len, 0)",
            "kv_left_frm_cache = jnp.maximum(kv_left - q_len + 1, 0)", tags=CI),
    _kernel("k-scale-dropped", "the logits are not multiplied by k_scale",
            "s *= k_scale", "s *= 1.0"),
]
