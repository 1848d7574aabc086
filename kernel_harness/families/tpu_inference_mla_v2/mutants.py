"""Mutant catalog for tpu-inference-mla-v2: bugs planted in tpu-inference's MLA v2 source
(``kernel_harness.records.mutant``; ``kernel-harness mutate``)."""

from __future__ import annotations

from kernel_harness.families.tpu_inference.mutants import tpu_inference_edits
from kernel_harness.records.mutant import CI, Mutant

_kernel = tpu_inference_edits("mla.v2.kernel")

#: CI kills the two ``ci`` ones (the mask and the cache path); the nightly kill matrix all.
MUTANTS: list[Mutant] = [
    _kernel("one-step-causal-excludes-diagonal",
            "one-step flash: a query no longer sees its own key",
            "mask = q_span < k_span\n            if sliding_window is not None:",
            "mask = q_span <= k_span\n            if sliding_window is not None:", tags=CI),
    _kernel("two-step-sum-not-rescaled",
            "two-step flash: the running softmax sum is not rescaled when the running max "
            "grows",
            "l_curr = exp_m_diff * l_prev + p_rowsum\n        head_l_ref[...] = l_curr\n\n"
            "        return p, exp_m_diff",
            "l_curr = l_prev + p_rowsum\n        head_l_ref[...] = l_curr\n\n"
            "        return p, exp_m_diff"),
    _kernel("last-new-token-read-from-cache",
            "one token fewer is taken from the new latents: the cache's stale slot is read "
            "for the first new token",
            "kv_left_frm_cache = jnp.maximum(kv_left - q_len, 0)\n"
            "            kv_left_frm_cache_per_kv_packing",
            "kv_left_frm_cache = jnp.maximum(kv_left - q_len + 1, 0)\n"
            "            kv_left_frm_cache_per_kv_packing", tags=CI),
    _kernel("one-step-window-one-key-too-many",
            "one-step flash: the sliding window lets in one key past its edge",
            "mask = jnp.logical_or(mask, q_span - sliding_window >= k_span)\n"
            "            mask_list.append(mask)",
            "mask = jnp.logical_or(mask, q_span - sliding_window > k_span)\n"
            "            mask_list.append(mask)"),
    _kernel("two-step-soft-cap-dropped", "two-step flash: the logit soft cap is never applied",
            "            s *= q_scale\n\n        if soft_cap is not None:\n"
            "            s = soft_cap * jnp.tanh(s / soft_cap)",
            "            s *= q_scale\n\n        if soft_cap is not None:\n"
            "            s = s"),
    _kernel("two-step-accumulator-not-rescaled",
            "two-step flash: the running output is not rescaled when the running max grows",
            "o_curr = broadcast_minor(exp_m_diff, o_prev.shape) * o_prev + pv\n"
            "        head_acc_ref[...] = o_curr\n\n    def _async_copy",
            "o_curr = o_prev + pv\n"
            "        head_acc_ref[...] = o_curr\n\n    def _async_copy"),
]
