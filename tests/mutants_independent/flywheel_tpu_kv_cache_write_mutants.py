"""Independent mutants of flywheel-tpu 0.3.0's paged KV-cache writer
(flywheel_tpu.pallas.kv_cache_write)."""

from kernel_harness.records.mutant import Mutant

_M = "flywheel_tpu.pallas.kv_cache_write"


def _m(name, doc, old, new, occurrence=None, tags=()):
    return Mutant(name=name, description=doc, module=_M, old=old, new=new, occurrence=occurrence,
                  tags=tags)


MUTANTS = [
    _m("ind-kv-swap-k-v",
       "K and V halves swapped in the interleave (V in row 2h, K in row 2h+1)",
       "k_bits | (v_bits << 16)",
       "v_bits | (k_bits << 16)"),
    _m("ind-kv-live-le",
       "off-by-one liveness test (<=): the first junk column past num_slices is written too",
       "is_live = slice_index < num_slices",
       "is_live = slice_index <= num_slices"),
    _m("ind-kv-interleave-floor",
       "interleave step count floors (length // step_rows): a piece's partial last step is not interleaved",
       "lax.fori_loop(0, pl.cdiv(length, step_rows), _interleave_step,",
       "lax.fori_loop(0, length // step_rows, _interleave_step,"),
    _m("ind-kv-last-piece-of-block",
       "interleave loop bound one short of a full block: the last piece of a full block is written uninterleaved/stale",
       "jnp.minimum(num_slices - first_piece, pieces_per_block)",
       "jnp.minimum(num_slices - first_piece, pieces_per_block - 1)"),
    _m("ind-kv-wrong-field-dst",
       "destination row read from the wrong slices field (new_row_start instead of cache_row_start)",
       "    cache_row_start, _, length = _piece_slice(i)",
       "    _, cache_row_start, length = _piece_slice(i)"),
    _m("ind-kv-grid-floor",
       "grid floors num_slices / pieces_per_block: the last partial block of pieces is never written",
       "grid=(pl.cdiv(num_slices[0], pieces_per_block),),",
       "grid=(num_slices[0] // pieces_per_block,),"),
    _m("ind-kv-signed-bits",
       "K bits widened as signed int16 -> int32: sign extension ORs 0xFFFF into V's half for negative K",
       "k_bits = lax.bitcast_convert_type(k_vmem[i, row_window],\n"
       "                                        jnp.uint16).astype(jnp.uint32)",
       "k_bits = lax.bitcast_convert_type(k_vmem[i, row_window],\n"
       "                                        jnp.int16).astype(jnp.int32).astype(jnp.uint32)"),
]

# Second batch (written after the first run): subtler bugs.
MUTANTS += [
    _m("ind-kv-copy-out-one-extra-row",
       "copy-out DMA one row too long: each piece also writes the staging row after it into the cache",
       "    copy = pltpu.make_async_copy(kv_vmem.at[i, pl.ds(0, length)],\n"
       "                                 out_hbm.at[pl.ds(cache_row_start, length)],",
       "    copy = pltpu.make_async_copy(kv_vmem.at[i, pl.ds(0, length + 1)],\n"
       "                                 out_hbm.at[pl.ds(cache_row_start, length + 1)],"),
    _m("ind-kv-src-row-off-by-one",
       "staging DMA reads k/v from new_row_start + 1 (off-by-one source row)",
       "src_hbm.at[pl.ds(new_row_start, length)]",
       "src_hbm.at[pl.ds(new_row_start + 1, length)]"),
    _m("ind-kv-no-wait-before-interleave",
       "staging DMAs not waited on before the interleave reads VMEM (a race on hardware)",
       "      copies.append(copy)\n  for copy in copies:\n    copy.wait()\n",
       "      copies.append(copy)\n"),
]
