"""Mutant catalog for gpu-paged: realistic bugs planted in the installed Pallas GPU paged
attention source (``jax.experimental.pallas.ops.gpu.paged_attention``).

``kernel-harness mutate gpu-paged`` loads each mutated copy in place of the original and
runs the family's properties; every mutant must be killed. Each edit's text is common to
jax 0.10.2 and 0.12.0.1. They cover the family's modes: an empty row (length 0), the length
mask of a partial page, the page-table slice of a multi-page compute block, the merge of
the k splits, the soft cap and the int8 V scales.
"""

from __future__ import annotations

from kernel_harness.records.mutant import CI, Mutant, edits_of

_kernel = edits_of("jax.experimental.pallas.ops.gpu.paged_attention")

MUTANTS: list[Mutant] = [
    _kernel("empty-row-reads-first-page",
            "a row of length 0 still runs its first page (every logit masked: the output "
            "is the mean of that page's values instead of 0)",
            "end_page_idx = jnp.minimum(pl.cdiv(lengths_ref[0], page_size), end_page_idx)",
            "end_page_idx = jnp.minimum(jnp.maximum(pl.cdiv(lengths_ref[0], page_size), 1), "
            "end_page_idx)", tags=CI),
    _kernel("mask-end-inclusive",
            "the length mask keeps the slot at index == length (one past the end of a row "
            "that ends mid-page)",
            "mask = jnp.arange(block_k) + curr_start_token_idx < lengths_ref[0]",
            "mask = jnp.arange(block_k) + curr_start_token_idx <= lengths_ref[0]", tags=CI),
    _kernel("page-slice-ignores-pages-per-block",
            "compute block i reads the page table from entry i, not i * pages_per_compute_block",
            "start_k * pages_per_compute_block, pages_per_compute_block",
            "start_k, pages_per_compute_block"),
    _kernel("split-merge-not-corrected",
            "the k splits' partial outputs are summed without rescaling to the common max",
            "o = o * correction[..., None].astype(o.dtype)", "o = o"),
    _kernel("denominator-not-corrected",
            "the running softmax denominator is not rescaled when a later block raises the max",
            "l_prev_corr = correction * l_prev", "l_prev_corr = l_prev"),
    _kernel("soft-cap-not-multiplied-back",
            "the soft cap returns tanh(logits / cap) without multiplying by cap",
            "logits = logits * attn_logits_soft_cap", "logits = logits",
            occurrence=1),  # the second is the module's own reference
    _kernel("int8-v-scales-dropped",
            "int8 V pages are used without their per-token scales",
            "s_curr *= v_scale.astype(s_curr.dtype)", "s_curr = s_curr"),
]
