"""Plain-jnp decode attention, shared by the references of the paged families: each gathers
a row's tokens through its page table first, then attends by the attention op's softmax and
dense-mask builder (:mod:`kernel_harness.ops.attention.reference`). Float32 at
Precision.HIGHEST; nothing here comes from a kernel."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.ops.attention.reference import attend, visibility

_HI = jax.lax.Precision.HIGHEST


def visible_lengths(lengths: np.ndarray, capacity: int) -> np.ndarray:
    """bool [batch, capacity]: token t of row b counts iff t < lengths[b] (the attention
    op's dense-mask builder, one query per row)."""
    return visibility(1, capacity, kv_lengths=np.asarray(lengths), xp=np)[:, 0, 0]


def token_pages(table: np.ndarray, page_size: int) -> tuple[np.ndarray, np.ndarray]:
    """int [batch, capacity] twice: the physical page and the slot of token t of row b
    (token t lives in page table[b, t // page_size] at slot t % page_size)."""
    t = np.arange(table.shape[1] * page_size)
    return table[:, t // page_size], np.broadcast_to(t % page_size, table.shape[:1] + t.shape)


def gather_tokens(pages: np.ndarray, table: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """float32 [kv_heads, batch, capacity, dim] from pages [kv_heads, total_pages,
    page_size, dim]: each row's tokens in order; tokens outside ``mask`` [batch, capacity]
    are 0 (they may hold NaN poison, which never enters the arithmetic)."""
    page, slot = token_pages(np.asarray(table), pages.shape[2])
    seq = np.asarray(pages, np.float32)[:, page, slot]
    return np.where(mask[None, :, :, None], seq, 0.0).astype(np.float32)


def grouped_decode_attention(q, k, v, mask, soft_cap, precision=_HI):
    """One query per row over its gathered tokens, by the attention op's softmax.

    q [batch, q_heads, dim]; k, v [kv_heads, batch, tokens, dim] with non-visible tokens
    already zeroed; mask bool [batch, tokens]. Query head h reads kv head
    ``h // (q_heads / kv_heads)``; ``soft_cap`` (or None) caps the logits as
    ``cap * tanh(s / cap)``; masked tokens get exactly zero weight and a row with no
    visible token gives 0.
    """
    k, v = (jnp.transpose(x, (1, 2, 0, 3)) for x in (k, v))  # [batch, tokens, kv_heads, dim]
    out, _ = attend(q[:, None], k, v, mask[:, None, None, :], 1.0, layout="bqhd",
                    soft_cap=soft_cap, precision=precision)
    return out[:, 0]


def paged_decode(q: np.ndarray, k_pages: np.ndarray, v_pages: np.ndarray, table: np.ndarray,
                 mask: np.ndarray, soft_cap: float | None) -> np.ndarray:
    """out float32 [batch, q_heads, dim]: q [batch, q_heads, dim] (logits are q.k, already
    scaled) over the tokens of float32 pages [kv_heads, total_pages, page_size, dim]
    gathered through ``table`` [batch, pages_per_seq], ``mask`` [batch, capacity] the
    visible tokens; run on the CPU."""
    with jax.default_device(jax.devices("cpu")[0]):
        out = _compiled(soft_cap)(jnp.asarray(q, jnp.float32),
                                  jnp.asarray(gather_tokens(k_pages, table, mask)),
                                  jnp.asarray(gather_tokens(v_pages, table, mask)),
                                  jnp.asarray(mask))
    return np.asarray(out, np.float32)


def paged_decode_low_precision(q: np.ndarray, k_pages: np.ndarray, v_pages: np.ndarray,
                               table: np.ndarray, mask: np.ndarray, soft_cap: float | None,
                               dtype: str, device: jax.Device) -> np.ndarray:
    """The low-precision twin of :func:`paged_decode` (the calibrated judge's yardstick):
    the same math with q, K, V and the softmax weights in ``dtype``, the dots at the
    default matmul precision, on ``device``; returned as float32."""
    dt = jnp.dtype(dtype)
    with jax.default_device(device):
        out = _compiled(soft_cap, None)(
            jnp.asarray(np.asarray(q, np.float32), dt),
            jnp.asarray(gather_tokens(k_pages, table, mask), dt),
            jnp.asarray(gather_tokens(v_pages, table, mask), dt), jnp.asarray(mask))
    return np.asarray(out, np.float32)


_PROGRAMS: dict[tuple[float | None, object], object] = {}


def _compiled(soft_cap: float | None, precision: object = _HI):
    key = (soft_cap, precision)
    if key not in _PROGRAMS:
        _PROGRAMS[key] = jax.jit(
            lambda q, k, v, m: grouped_decode_attention(q, k, v, m, soft_cap, precision),
            compiler_options={"xla_backend_optimization_level": 0})
    return _PROGRAMS[key]


@dataclasses.dataclass(frozen=True, kw_only=True)
class PagedCall:
    """One paged-decode case in the op's vocabulary: q [batch, q_heads, dim] (already
    scaled), K and V pages [kv_heads, total_pages, page_size, dim] as float32 holding the
    values the kernel's contract computes with (dequantized, rounded), the page ``table``
    [batch, pages_per_seq], the visible tokens ``mask`` [batch, capacity] and the soft cap."""

    q: np.ndarray
    k_pages: np.ndarray
    v_pages: np.ndarray
    table: np.ndarray
    mask: np.ndarray
    soft_cap: float | None


def references(call_of: Callable[[Any, dict[str, np.ndarray]], PagedCall]
               ) -> tuple[Callable[..., dict[str, np.ndarray]],
                          Callable[..., dict[str, np.ndarray]]]:
    """``(reference, low_precision_reference)`` of a paged family whose cases map onto the
    op by ``call_of(case, inputs)``: :func:`paged_decode` and its low-precision twin."""

    def reference(case: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """out [batch, q_heads, head_dim] in float32 (:func:`paged_decode`)."""
        c = call_of(case, inputs)
        return {"out": paged_decode(c.q, c.k_pages, c.v_pages, c.table, c.mask, c.soft_cap)}

    def low_precision_reference(case: Any, inputs: dict[str, np.ndarray],
                                backend: Backend) -> dict[str, np.ndarray]:
        """The calibrated judge's yardstick: the same math with q, the contract's K/V and the
        softmax weights in ``case.dtype``, default matmul precision, on ``backend``'s device."""
        c = call_of(case, inputs)
        return {"out": paged_decode_low_precision(c.q, c.k_pages, c.v_pages, c.table, c.mask,
                                                  c.soft_cap, case.dtype, backend.device)}

    return reference, low_precision_reference
