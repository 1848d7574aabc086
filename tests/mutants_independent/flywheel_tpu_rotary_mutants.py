"""Independent mutants of flywheel-tpu 0.3.0's fused rotary (flywheel_tpu.pallas.rotary)."""

from kernel_harness.records.mutant import Mutant

_M = "flywheel_tpu.pallas.rotary"


def _m(name, doc, old, new, occurrence=None, tags=()):
    return Mutant(name=name, description=doc, module=_M, old=old, new=new, occurrence=occurrence,
                  tags=tags)


MUTANTS = [
    _m("ind-rot-sine-sign",
       "rotate-by-minus-angle: the first element of each pair takes +sin instead of -sin",
       "sine = jnp.where(is_first_of_pair, -swapped, packed)",
       "sine = jnp.where(is_first_of_pair, swapped, packed)"),
    _m("ind-rot-interleave-rolls-swapped",
       "interleaved pairing: the two rolls are swapped, each dim gets the wrong partner",
       "      return jnp.where(is_first_of_pair,\n"
       "                       pltpu.roll(value, head_dim - 1, head_dim_axis),\n"
       "                       pltpu.roll(value, 1, head_dim_axis))",
       "      return jnp.where(is_first_of_pair,\n"
       "                       pltpu.roll(value, 1, head_dim_axis),\n"
       "                       pltpu.roll(value, head_dim - 1, head_dim_axis))"),
    _m("ind-rot-split-half-le",
       "split pairing: first-half mask uses <= so dim head_dim/2 is treated as a first-half dim",
       "is_first_of_pair = dim_ids < head_dim // 2",
       "is_first_of_pair = dim_ids <= head_dim // 2"),
    _m("ind-rot-position-plus-one",
       "off-by-one position: each query sits one position later (offset len_k - len_q + 1)",
       "q_positions = _packed_positions(cu_q, seqlen_q, k_lens - q_lens)",
       "q_positions = _packed_positions(cu_q, seqlen_q, k_lens - q_lens + 1)"),
    _m("ind-rot-searchsorted-left",
       "sequence lookup with side='left': a sequence's first token is attributed to the previous sequence",
       'jnp.searchsorted(cu_seqlens, token_ids, side="right") - 1',
       'jnp.searchsorted(cu_seqlens, token_ids, side="left") - 1'),
    _m("ind-rot-interleaved-table-swap",
       "interleaved table packs [sin, cos] instead of [cos, sin]",
       "table = jnp.stack((cos, sin), axis=-1).reshape(cos.shape[0], rotary_dim)",
       "table = jnp.stack((sin, cos), axis=-1).reshape(cos.shape[0], rotary_dim)"),
    _m("ind-rot-coeffs-in-x-dtype",
       "cos/sin coefficients rounded to x's dtype (bf16) before the f32 rotation, where f32 tables are declared",
       "packed = coefficients.astype(jnp.float32)",
       "packed = coefficients.astype(tile.dtype).astype(jnp.float32)"),
    _m("ind-rot-last-seq-clamp",
       "sequence-id clamp one too low: the last sequence's tokens use the previous sequence's start/offset",
       "cu_seqlens.shape[0] - 2)",
       "cu_seqlens.shape[0] - 3)"),
]

# Second batch (written after the first run): subtler bugs, and one equivalent under the contract.
MUTANTS += [
    _m("ind-rot-products-rounded",
       "each product x*cos and x'*sin rounded to x's dtype before the sum (rounds twice, where once is declared)",
       "rotated = tile_f32 * cosine + _swap_pairs(tile_f32) * sine",
       "rotated = ((tile_f32 * cosine).astype(tile.dtype).astype(jnp.float32)\n"
       "             + (_swap_pairs(tile_f32) * sine).astype(tile.dtype).astype(jnp.float32))"),
    _m("ind-rot-axis-fixed",
       "head-dim axis hard-coded to the minor axis: a transposed (head_dim, tokens) tile is rotated along tokens",
       "head_dim_axis = 1 if head_dim_minor else 0",
       "head_dim_axis = 1"),
    _m("ind-rot-pad-positions",
       "[EQUIVALENT under the contract] pad tokens past the last sequence keep a running position instead of 0 "
       "(pad tokens are outside the contract)",
       "return jnp.where(token_ids < cu_seqlens[-1], positions, 0)",
       "return positions", tags=("equivalent",)),
]
