"""Independent plain-jnp reference for tpu-ragged-paged: per active sequence, gather its
keys and values page by page from the page table, build the dense causal (and window)
mask from the case's lengths in numpy, and take a float32 softmax at
Precision.HIGHEST. Rows past the active sequences' tokens are left 0 (excluded by the
family's ``valid``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.families.tpu_ragged_paged.cases import RaggedCase
from kernel_harness.ops.attention.reference import attend, visibility

_HI = jax.lax.Precision.HIGHEST


def allowed(q_len: int, kv_len: int, window: int | None) -> np.ndarray:
    """bool [q_len, kv_len]: query j (at position kv_len - q_len + j) sees key t when
    t <= its position and, with a window, t > position - window (the attention op's
    dense-mask builder, bottom-right aligned)."""
    return visibility(q_len, kv_len, causal=True, q_offset=kv_len - q_len, xp=np,
                      window=None if window is None else (window - 1, None))[0, 0]


def sequence_kv(case: RaggedCase, kv_pages: np.ndarray, table_row: np.ndarray, kv_len: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """float32 K and V [kv_len, num_kv_heads, head_dim] of one sequence: token t lies in
    page table_row[t // page_size] at offset t % page_size; K in combined head 2h, V 2h+1."""
    t = np.arange(kv_len)
    tokens = kv_pages[table_row[t // case.page_size], t % case.page_size].astype(np.float32)
    return tokens[:, 0::2], tokens[:, 1::2]


def attend_sequence(q, k, v, mask, *, sm_scale: float, soft_cap: float | None, ratio: int):
    """out [q_len, num_q_heads, head_dim] by the attention op's softmax (query head h reads
    kv head h // ratio; ``ratio`` is implied by the shapes and kept as the cache key)."""
    del ratio
    out, _ = attend(q[None], k[None], v[None], mask[None, None], sm_scale,
                          layout="bqhd", soft_cap=soft_cap, precision=_HI)
    return out[0]


#: ``attend_sequence`` as one program per sequence shape. Run eagerly, its dozen jnp ops were each
#: compiled for every sequence's (q_len, kv_len): 352 small programs and 5.6 s of compiling
#: in a 6-example check, against 8 kernel programs. Same operations and precision; the
#: exported script keeps the eager ``attend_sequence`` (its reference agrees to 1e-6).
_attend = jax.jit(attend_sequence, static_argnames=("sm_scale", "soft_cap", "ratio"))


def reference(case: RaggedCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """out [max_tokens, num_q_heads, head_dim] float32 from the (dtype-rounded) inputs."""
    q_all = np.asarray(inputs["q"], np.float32)
    pages = np.asarray(inputs["kv_pages"])
    table = np.asarray(inputs["page_indices"])
    out = np.zeros(q_all.shape, np.float32)
    start = 0
    ratio = case.num_q_heads // case.num_kv_heads
    with jax.default_device(jax.devices("cpu")[0]):
        for i, (q_len, kv_len) in enumerate(zip(case.q_lens, case.kv_lens, strict=True)):
            k, v = sequence_kv(case, pages, table[i], kv_len)
            o = _attend(jnp.asarray(q_all[start:start + q_len]), jnp.asarray(k),
                       jnp.asarray(v), jnp.asarray(allowed(q_len, kv_len, case.sliding_window)),
                       sm_scale=case.sm_scale, soft_cap=case.soft_cap, ratio=ratio)
            out[start:start + q_len] = np.asarray(o, np.float32)
            start += q_len
    return {"out": out}
