"""Mutant catalog for tpu-all-gather: synchronisation bugs planted in the corrected ring
(``kernel_harness.records.mutant``; ``kernel-harness mutate``).

jax's own kernel fails the family at 3 or more devices (its finding,
findings/tpu-all-gather-shared-recv-semaphore), so a mutant planted in it would be judged
against a kernel that already fails. The mutants go into the ring that passes
(:data:`IMPL`, run in place of the family's kernel for the control and every mutant): a
shared receive semaphore (jax's bug, put back), a missing wait, a wrong neighbour, a slot
forwarded from the wrong half, the local copy not waited, one ring step short.
"""

from __future__ import annotations

from kernel_harness.records.mutant import CI, Mutant, edits_of

#: The implementation the mutants are planted in (``regression.mutate.catalog_impl``).
IMPL = "kernel_harness.kernels.all_gather_ring:all_gather"

_ring = edits_of("kernel_harness.kernels.all_gather_ring")

MUTANTS: list[Mutant] = [
    _ring("shared-receive-semaphore",
          "every step's remote copy signals the direction's first receive semaphore (jax's "
          "kernel): a wait can be satisfied by the next step's DMA, and a slot forwarded "
          "before it arrived (3+ devices, out-of-order DMAs)",
          "recv_sems.at[direction, step], device_id=device(to))",
          "recv_sems.at[direction, 0], device_id=device(to))"),
    _ring("missing-wait", "the leftward copies are never waited for: their slots are "
          "forwarded, and read, before they arrived",
          "for copy in copies:", "for copy in copies[:1]:", tags=CI),
    _ring("wrong-neighbour-slot",
          "the rightward copy of step i sends slot my_id + i instead of my_id - i "
          "(3+ devices: a slot the right neighbour already has, another never arrives)",
          "(right, _neighbour(my_id, size, -step), pl.ds(half, half))",
          "(right, _neighbour(my_id, size, step), pl.ds(half, half))"),
    _ring("leftward-sends-upper-half",
          "the leftward copy sends the upper half of its slot, as the rightward one does: "
          "the lower halves never travel",
          "(left, _neighbour(my_id, size, step), pl.ds(0, half))",
          "(left, _neighbour(my_id, size, step), pl.ds(half, half))"),
    _ring("local-copy-not-waited",
          "the device's own shard is copied into its slot without waiting for the copy",
          "pltpu.async_copy(x_ref, o_ref.at[my_id], local_sem).wait()",
          "pltpu.async_copy(x_ref, o_ref.at[my_id], local_sem)"),
    _ring("one-step-short", "the ring stops one step early: the farthest slots never arrive",
          "for step in range(size - 1):", "for step in range(size - 2):"),
]
