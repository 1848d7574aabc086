"""Mutant catalog for tpu-inference-all-gather-matmul: synchronisation bugs planted in
tpu-inference's all-gather matmul source (``kernel_harness.records.mutant``;
``kernel-harness mutate``)."""

from __future__ import annotations

from kernel_harness.families.tpu_inference.mutants import tpu_inference_edits
from kernel_harness.records.mutant import CI, Mutant

_kernel = tpu_inference_edits("collectives.all_gather_matmul")

MUTANTS: list[Mutant] = [
    _kernel("first-left-wait-dropped",
            "the wait for the first slot received from the left is dropped: its rows are "
            "multiplied whether or not they arrived",
            "_do_first_left_remote_copy(wait=True)", "None", tags=CI),
    _kernel("later-right-wait-dropped",
            "the wait for the later slots received from the right is dropped",
            "_do_subsequent_right_remote_copy(wait=True)", "None"),
    _kernel("barrier-dropped",
            "the barrier with both neighbours before the first remote copies is dropped",
            "util.local_barrier(left_neighbor, right_neighbor)", "None"),
    _kernel("y-copy-wait-dropped", "the wait for y's local copy into VMEM is dropped",
            "_do_y_local_copy(wait=True)", "None"),
    _kernel("out-copy-wait-dropped", "the wait for an output block's copy to HBM is dropped",
            "_do_o_local_copy(wait=True)", "None"),
    _kernel("accumulator-overwritten",
            "with several k blocks (y plain), each block's product overwrites the float32 "
            "accumulator instead of adding to it", "acc_vmem_scratch_ref[...] += jnp.dot(",
            "acc_vmem_scratch_ref[...] = jnp.dot(", tags=CI),
    _kernel("output-stored-after-first-k-block",
            "the accumulator is stored to the output after the first k block, not the last",
            "@pl.when(working_bk_i == grid_k - 1)", "@pl.when(working_bk_i == 0)"),
]
