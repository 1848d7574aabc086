"""Mutant catalog for tpu-paged: realistic bugs planted in the installed TPU paged attention
source (``paged_attention_kernel`` and its ``quantization_utils``).

``kernel-harness mutate tpu-paged`` loads each mutated copy in place of the original and
runs the family's properties; every mutant must be killed. Each edit's text is common to
jax 0.10.2 and 0.12.0.1. They cover the length mask of a partial page/block, the page
offset of a multi-page block, the online-softmax rescale, the soft cap, the megacore row
split, the zero-length-row skip of the prefetch chain, the int8 dequantization, and
precision (q or the softmax weights rounded to bfloat16: a float32 kernel must not hide
behind the contract's bfloat16 K/V).
"""

from __future__ import annotations

from kernel_harness.records.mutant import CI, Mutant, edits_of

KERNEL = "jax.experimental.pallas.ops.tpu.paged_attention.paged_attention_kernel"
QUANT = "jax.experimental.pallas.ops.tpu.paged_attention.quantization_utils"


_kernel = edits_of(KERNEL)
_quant = edits_of(QUANT)


MUTANTS: list[Mutant] = [
    _kernel("mask-end-inclusive",
            "the length mask keeps the token at index == length (one slot past the end of a "
            "row that ends mid-block)", "jax.lax.broadcasted_iota(jnp.int32, qk.shape, 1) < length",
            "jax.lax.broadcasted_iota(jnp.int32, qk.shape, 1) <= length", tags=CI),
    _kernel("mask-dropped",
            "no length mask inside a block: every loaded slot of a partial block counts",
            "qk = qk + jnp.where(mask, 0.0, mask_value)", "qk = qk"),
    _kernel("page-offset-ignores-pages-per-block",
            "the page-table offset of block i is i pages, not i * pages_per_compute_block",
            "page_offset = b * pages_per_sequence + i * pages_per_compute_block",
            "page_offset = b * pages_per_sequence + i", tags=CI),
    _kernel("no-rescale-of-running-output",
            "the running output is not rescaled by alpha when a later block raises the max",
            "(l_prev * alpha * o_ref[...] + beta * o_curr) / l_next",
            "(l_prev * o_ref[...] + beta * o_curr) / l_next", tags=CI),
    _kernel("no-rescale-of-block-output",
            "the new block's output is added without its beta rescale",
            "(l_prev * alpha * o_ref[...] + beta * o_curr) / l_next",
            "(l_prev * alpha * o_ref[...] + o_curr) / l_next"),
    _kernel("denominator-not-rescaled", "the running softmax denominator is not rescaled by alpha",
            "l_next = alpha * l_prev + beta * l_curr", "l_next = l_prev + beta * l_curr"),
    _kernel("soft-cap-not-multiplied-back",
            "the soft cap returns tanh(qk / cap) without multiplying by cap",
            "qk = capped_qk * attn_logits_soft_cap", "qk = capped_qk"),
    _kernel("megacore-batch-same-rows",
            "megacore 'batch': both cores start at row 0 (the odd rows are never computed)",
            'b_start = core_index if megacore_mode == "batch" else 0', "b_start = 0"),
    _kernel("megacore-kv_head-stride",
            "megacore 'kv_head': a core steps through kv heads one by one instead of every "
            "num_cores-th (a core with several heads computes its neighbour's; with one head "
            "per core nothing shows)",
            'h_step = num_cores if megacore_mode == "kv_head" else 1', "h_step = 1"),
    _kernel("prefetch-does-not-skip-empty-rows",
            "the prefetch chain does not skip further zero-length rows after the first",
            "lambda _, b: jnp.where(lengths_ref[b] == 0, b + b_step, b)", "lambda _, b: b"),
    _kernel("q-in-bf16",
            "the float32 query is rounded to bfloat16 in the kernel (a float32 kernel hiding "
            "behind the bfloat16 K/V contract)", "q = q_ref[...].astype(jnp.float32)",
            "q = q_ref[...].astype(jnp.bfloat16).astype(jnp.float32)", tags=CI),
    _kernel("softmax-weights-in-bf16",
            "the softmax weights are rounded to bfloat16 before the PV dot",
            'o_curr = jnp.einsum("gt,td->gd", s_curr, v)',
            'o_curr = jnp.einsum("gt,td->gd", s_curr.astype(jnp.bfloat16).astype(jnp.float32), v)'),
    _quant("int8-divisor-127",
           "int8 pages are dequantized with 127 instead of the quantizer's 127.5",
           "return x.astype(dtype) * h / MAX_INT8", "return x.astype(dtype) * h / 127.0", tags=CI),
]
