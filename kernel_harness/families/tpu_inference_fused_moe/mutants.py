"""Mutant catalog for tpu-inference-fused-moe: synchronisation and routing bugs planted in
tpu-inference's fused MoE source (``kernel_harness.records.mutant``; ``kernel-harness
mutate``)."""

from __future__ import annotations

from kernel_harness.families.tpu_inference.mutants import tpu_inference_edits
from kernel_harness.records.mutant import CI, Mutant

_kernel = tpu_inference_edits("fused_moe.v1.kernel")

MUTANTS: list[Mutant] = [
    _kernel("scatter-recv-wait-dropped",
            "an expert's FFN starts without waiting for the tokens scattered to it: it reads "
            "its receive buffer whether or not they arrived",
            "            wait_a2a_scatter_recv(bt_id, e_sem_id, local_e_id)\n",
            "            None\n", tags=CI),
    _kernel("gather-recv-wait-dropped",
            "the combine starts without waiting for the expert outputs sent back",
            "        # Wait to receive a2a gather for ALL experts.\n"
            "        wait_a2a_gather_recv_all()\n",
            "        # Wait to receive a2a gather for ALL experts.\n        None\n"),
    _kernel("next-expert-scattered-into-current-slot",
            "the next expert's tokens are scattered into the receive slot the current "
            "expert is computing from (double buffering collapsed)",
            "start_a2a_scatter(bt_id, next_e_sem_id, next_local_e_id)",
            "start_a2a_scatter(bt_id, e_sem_id, next_local_e_id)"),
    _kernel("output-slot-reused-unwaited",
            "a token block's output is written into its VMEM slot without waiting for the "
            "copy of the block two steps back out of it",
            "wait_send_bo(bt_id=bt_id - 2)", "None"),
    _kernel("renormalization-dropped",
            "the top-k scores are not divided by their sum when renormalization is asked",
            "top_k_logits_lst[k_id] /= top_k_logits_sum", "top_k_logits_lst[k_id] /= 1.0"),
    _kernel("second-choice-not-masked",
            "the expert chosen k-th is not masked out before choosing the next: a token's "
            "top-k repeats its best expert", "input = jnp.where(mask, -jnp.inf, input)",
            "input = input"),
]
