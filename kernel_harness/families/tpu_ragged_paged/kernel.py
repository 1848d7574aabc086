"""Adapter running TPU ragged paged attention (forward only: an inference kernel) on a
backend.

The kernel has no ``interpret=`` switch. Both CPU backends run it in **TPU interpret
mode** (the only interpreter that runs a TPU kernel without one): ``interpret`` with
plain settings (zeroed scratch, no race detection, one core; what
:meth:`Backend.forcing_interpret` gives every such kernel), ``tpu-interpret`` with the
harness's diagnostic settings. Either way the TPU interpreter of jax 0.10.2 and 0.12.0.1
cannot run this kernel unextended (reads through a reshaped/bitcast ref, masked stores
to 3-D refs), so interpreted runs happen inside
:func:`kernel_harness.core.compat.interpreter_ext.tpu_interpreter_extensions`; on ``tpu`` the kernel
compiles to Mosaic with nothing extended.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as _rpa

from kernel_harness.ops.paged_attention.keywords import attention_keywords, block_keywords
from kernel_harness.records.adapter import TPU_BACKENDS, JittedTpuProgram, KernelSignatureError

#: The default implementation: the kernel's public (jitted) entry point.
ragged_paged_attention = _rpa.ragged_paged_attention

IMPL_SIGNATURE = (
    "impl(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, *, sm_scale, "
    "sliding_window, soft_cap, num_kv_pages_per_block, num_queries_per_block) -> out; "
    "q: [max_tokens, num_q_heads, head_dim], kv_pages: [total_pages, page_size, "
    "2 * num_kv_heads, head_dim] (K in even, V in odd combined heads), kv_lens: int32 "
    "[max_num_seqs], page_indices: int32 [max_num_seqs, pages_per_seq], cu_q_lens: int32 "
    "[max_num_seqs + 1], num_seqs: int32 [1]; out like q"
)

RAGGED_BACKENDS = TPU_BACKENDS
_OPERANDS = ("q", "kv_pages", "kv_lens", "page_indices", "cu_q_lens", "num_seqs")
__all__ = ["ADAPTER", "KernelSignatureError", "PROGRAM", "ragged_paged_attention", "run",
           "traceable"]


def _options(f: dict[str, Any], interpreted: bool) -> dict[str, Any]:
    return {**attention_keywords(f), **block_keywords(f)}


#: The kernel as one jitted program: out (float32, every row; the family's ``valid`` says
#: which rows the contract defines). Its keywords are checked first (jax 0.10.2 and
#: 0.12.0.1 agree); interpreted inside the extensions, compiled at XLA's level 0 there.
PROGRAM = JittedTpuProgram(
    family="tpu-ragged-paged", kernel=ragged_paged_attention,
    operands=lambda case: _OPERANDS, options=_options, outputs=("out",),
    shapes=lambda case, inputs: [np.shape(inputs["q"])], extended=True,
    keywords=("sm_scale", "sliding_window", "soft_cap", "num_kv_pages_per_block",
              "num_queries_per_block"),
    low_opt_when_interpreted=True)
run = PROGRAM.run
traceable = PROGRAM.traceable

#: How the tpu-ragged-paged family calls its kernel.
ADAPTER = PROGRAM.adapter(impl_signature=IMPL_SIGNATURE, backends=RAGGED_BACKENDS)
