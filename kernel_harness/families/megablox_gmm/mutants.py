"""Mutant catalog for megablox-gmm: realistic bugs planted in the installed megablox source.

``kernel-harness mutate megablox-gmm`` loads each mutated copy of
``jax.experimental.pallas.ops.tpu.megablox.gmm`` (or ``ops``, the custom VJP) in place of
the original and runs the family's properties; every mutant must be killed. They cover
the group metadata (tile rounding, partial tiles, shard bounds), the row masks of the
store, the rhs/output group offset, the k-remainder mask, accumulator reset and store
steps, and precision.
"""

from __future__ import annotations

from kernel_harness.records.mutant import CI, Mutant, edits_of

GMM = "jax.experimental.pallas.ops.tpu.megablox.gmm"
OPS = "jax.experimental.pallas.ops.tpu.megablox.ops"

_OFFSET = ("return group_ids[grid_id] - group_offset[0], k_i, n_i",
           "return group_ids[grid_id], k_i, n_i")


_gmm = edits_of(GMM)
_ops = edits_of(OPS)


MUTANTS: list[Mutant] = [
    _gmm("store-mask-end-inclusive",
         "the row mask of a group includes the first row of the next group (gmm store, tgmm "
         "operands)", "return jnp.logical_and(iota >= group_start, iota < group_end)",
         "return jnp.logical_and(iota >= group_start, iota <= group_end)", tags=CI),
    _gmm("store-mask-start-exclusive", "the row mask of a group drops its first row",
         "return jnp.logical_and(iota >= group_start, iota < group_end)",
         "return jnp.logical_and(iota > group_start, iota < group_end)"),
    _gmm("group-end-rounded-down",
         "group ends are rounded down to the tile: a group's last partial tile is never visited",
         "rounded_group_ends = ((group_ends + tm - 1) // tm * tm).astype(jnp.int32)",
         "rounded_group_ends = (group_ends // tm * tm).astype(jnp.int32)", tags=CI),
    _gmm("empty-group-gets-tile",
         "empty groups are not special-cased: an empty group starting mid-tile is counted as "
         "one tile, shifting the group ids against the tile ids",
         "rounded_group_sizes = jnp.where(group_sizes == 0, 0, rounded_group_sizes)",
         "rounded_group_sizes = rounded_group_sizes"),
    _gmm("partial-tile-predicate-inverted",
         "the partial-tile predicate is inverted (revisits tiles of aligned groups instead of "
         "unaligned ones)", "(group_offsets[:-1] % tm) == 0, group_sizes == 0",
         "(group_offsets[:-1] % tm) != 0, group_sizes == 0"),
    _gmm("shard-drops-last-group",
         "off by one in the shard bounds: the shard's last group is not computed",
         "active_group_mask = jnp.logical_and(iota <= end_group, iota >= start_group)",
         "active_group_mask = jnp.logical_and(iota < end_group, iota >= start_group)", tags=CI),
    _gmm("gmm-rhs-ignores-group-offset",
         "gmm reads rhs by the global group id, not the id within the shard", *_OFFSET,
         occurrence=1, tags=CI),
    _gmm("tgmm-out-ignores-group-offset",
         "tgmm writes drhs by the global group id, not the id within the shard", *_OFFSET,
         occurrence=2),
    _gmm("zeroing-keeps-next-shard-row",
         "rows outside the shard are zeroed with an inclusive end: the first row after the "
         "shard keeps uninitialized memory",
         "valid_mask = (valid_mask >= group_start) & (valid_mask < group_end)",
         "valid_mask = (valid_mask >= group_start) & (valid_mask <= group_end)"),
    _gmm("k-remainder-mask-off-by-one", "the k-remainder mask keeps one column past k",
         "return jnp.where(iota < k_rem, x, 0).astype(orig_dtype)",
         "return jnp.where(iota <= k_rem, x, 0).astype(orig_dtype)"),
    _gmm("gmm-stores-at-first-k-tile",
         "gmm stores its accumulator after the first k tile instead of the last",
         "        k_i == tiles_k - 1,\n", "        k_i == 0,\n"),
    _gmm("tgmm-acc-not-reset-per-group",
         "tgmm zeroes its accumulator only at the first grid step, not when the group changes",
         "group_has_changed = jnp.logical_or(grid_id == 0, prev_group != group)",
         "group_has_changed = grid_id == 0", tags=CI),
    _gmm("gmm-transpose-ignored-in-index-map",
         "with transpose_rhs the rhs block index keeps the (k, n) order",
         "    if transpose_rhs:\n      k_i, n_i = n_i, k_i\n", "\n"),
    _gmm("gmm-operands-in-bf16", "gmm rounds its operands to bfloat16 whatever the input dtype",
         "mask_k_rem_lhs(loaded_lhs).astype(input_dtype),\n"
         "          mask_k_rem_rhs(loaded_rhs).astype(input_dtype),",
         "mask_k_rem_lhs(loaded_lhs).astype(jnp.bfloat16),\n"
         "          mask_k_rem_rhs(loaded_rhs).astype(jnp.bfloat16),", tags=CI),
    _gmm("tgmm-operands-in-bf16",
         "tgmm (drhs) rounds its operands to bfloat16 whatever the input dtype",
         "loaded_lhs.astype(input_dtype),\n          loaded_rhs.astype(input_dtype),",
         "loaded_lhs.astype(jnp.bfloat16),\n          loaded_rhs.astype(jnp.bfloat16),"),
    _ops("vjp-dlhs-transpose-flag-kept",
         "the VJP computes dlhs with the forward's transpose flag instead of its negation",
         "transpose_rhs=not transpose_rhs,", "transpose_rhs=transpose_rhs,"),
]
