"""Mutant catalog for flywheel-tpu-rotary: bugs planted in flywheel-tpu's rotary source
(``kernel_harness.records.mutant``; ``kernel-harness mutate``)."""

from __future__ import annotations

from kernel_harness.families.flywheel_tpu_rotary.kernel import MODULE
from kernel_harness.records.mutant import CI, Mutant, edits_of

_m = edits_of(MODULE)

MUTANTS: list[Mutant] = [
    _m("rotates-backwards", "the sine's sign is flipped: every pair rotates by -angle",
       "sine = jnp.where(is_first_of_pair, -swapped, packed)",
       "sine = jnp.where(is_first_of_pair, swapped, packed)", tags=CI),
    _m("interleaved-table-swapped", "the interleaved plane packs [sin, cos] pairs",
       "jnp.stack((cos, sin), axis=-1)", "jnp.stack((sin, cos), axis=-1)", tags=CI),
    _m("split-table-swapped", "the split plane packs [sin | cos]",
       "jnp.concatenate((cos, sin), axis=-1)", "jnp.concatenate((sin, cos), axis=-1)"),
    _m("position-off-by-one", "queries sit one position early (the offset of a chunk "
       "after its cached tokens is one short)",
       "_packed_positions(cu_q, seqlen_q, k_lens - q_lens)",
       "_packed_positions(cu_q, seqlen_q, k_lens - q_lens - 1)"),
    _m("sequence-start-misassigned", "a sequence's first token is given the previous "
       "sequence's offset (searchsorted on the wrong side)",
       'jnp.searchsorted(cu_seqlens, token_ids, side="right")',
       'jnp.searchsorted(cu_seqlens, token_ids, side="left")'),
    _m("split-half-boundary-off", "the split pairing's first half takes one dim too many",
       "is_first_of_pair = dim_ids < head_dim // 2",
       "is_first_of_pair = dim_ids <= head_dim // 2"),
    _m("interleaved-partner-wrong", "an interleaved pair's first dim reads its "
       "predecessor instead of its successor",
       "pltpu.roll(value, head_dim - 1, head_dim_axis),",
       "pltpu.roll(value, 1, head_dim_axis),"),
]
