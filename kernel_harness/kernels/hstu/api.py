"""HSTU pointwise attention: the public entry point ``hstu_attention``, its argument
checks and the custom VJP tying the forward and backward Pallas kernels together.

``hstu_attention`` validates its arguments, turns the static mask description
(``"causal"``, ``"full"`` or a numpy bool array, optionally AND a sliding
window) into block-sparsity tables on the host, and calls one jitted
custom-VJP function whose compiled program depends only on shapes, block
sizes, dtype, scale and whether segment ids / a numpy mask are present: the
tables, the window and the mask itself are traced operands.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.kernels.hstu.backward import hstu_backward
from kernel_harness.kernels.hstu.forward import (
    NUM_LANES,
    NUM_SUBLANES,
    KernelConfig,
    hstu_forward,
)
from kernel_harness.kernels.hstu.planning import cached_tables

#: Largest default block (the default is ``min(DEFAULT_BLOCK, length)``).
DEFAULT_BLOCK = 512
MASK_TYPES = ("causal", "full")


# ----------------------------------------------------------------------------- validation


def _check_block(name: str, value: int, length: int, length_name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    if value % NUM_LANES:
        raise ValueError(
            f"{name}={value} breaks the 128-lane rule: block sizes must be multiples of "
            f"{NUM_LANES}"
        )
    if length % value:
        raise ValueError(f"{name}={value} does not divide {length_name}={length}")


def _resolve_blocks(q_len: int, kv_len: int, given: dict[str, int | None]) -> dict[str, int]:
    """Fills block-size defaults and checks every block (ValueError on a bad one)."""
    b = dict(given)
    defaults = {
        "block_q": min(DEFAULT_BLOCK, q_len), "block_kv": min(DEFAULT_BLOCK, kv_len),
        "block_q_dkv": min(DEFAULT_BLOCK, q_len), "block_kv_dkv": min(DEFAULT_BLOCK, kv_len),
    }
    for name, default in defaults.items():
        b[name] = default if b[name] is None else b[name]
    for compute, memory in (("block_kv_compute", "block_kv"),
                            ("block_kv_dkv_compute", "block_kv_dkv")):
        b[compute] = b[memory] if b[compute] is None else b[compute]
    _check_block("block_q", b["block_q"], q_len, "q_len")
    _check_block("block_kv", b["block_kv"], kv_len, "kv_len")
    _check_block("block_kv_compute", b["block_kv_compute"], b["block_kv"], "block_kv")
    _check_block("block_q_dkv", b["block_q_dkv"], q_len, "q_len")
    _check_block("block_kv_dkv", b["block_kv_dkv"], kv_len, "kv_len")
    _check_block(
        "block_kv_dkv_compute", b["block_kv_dkv_compute"], b["block_kv_dkv"], "block_kv_dkv"
    )
    return {k: int(v) for k, v in b.items()}


def _check_inputs(q: Any, k: Any, v: Any) -> None:
    ranks = tuple(getattr(x, "ndim", None) for x in (q, k, v))
    if ranks != (4, 4, 4):
        raise ValueError(
            f"q, k and v must have rank 4 [batch, length, heads, head_dim]; got ranks {ranks}"
        )
    if k.shape != v.shape:
        raise ValueError(f"k and v shapes differ: {k.shape} vs {v.shape}")
    (bq, _, hq, dq), (bk, _, hk, dk) = q.shape, k.shape
    if bq != bk:
        raise ValueError(f"batch mismatch: q has batch {bq}, k/v have {bk}")
    if hq != hk:
        raise ValueError(
            f"head mismatch: q has {hq} heads, k/v have {hk} (no grouped-query support)"
        )
    if dq != dk:
        raise ValueError(f"head_dim mismatch: q has {dq}, k/v have {dk}")
    dtypes = {jnp.dtype(x.dtype) for x in (q, k, v)}
    if len(dtypes) != 1 or not jnp.issubdtype(q.dtype, jnp.floating):
        raise ValueError(f"q, k, v must share one floating dtype, got {sorted(map(str, dtypes))}")


def _check_segments(q_seg: Any, kv_seg: Any, batch: int, q_len: int, kv_len: int) -> bool:
    if (q_seg is None) != (kv_seg is None):
        raise ValueError("pass both q_segment_ids and kv_segment_ids, or neither")
    if q_seg is None:
        return False
    for name, ids, length in (("q_segment_ids", q_seg, q_len), ("kv_segment_ids", kv_seg, kv_len)):
        if tuple(getattr(ids, "shape", ())) != (batch, length):
            raise ValueError(
                f"{name} must have shape {(batch, length)}, got {getattr(ids, 'shape', None)}"
            )
        if not jnp.issubdtype(ids.dtype, jnp.integer):
            raise ValueError(f"{name} must be integers, got {ids.dtype}")
    return True


def _check_mask_type(mask_type: Any, q_len: int, kv_len: int) -> np.ndarray | None:
    """Returns the numpy mask (or None for "causal"/"full"); ValueError otherwise."""
    if isinstance(mask_type, np.ndarray):
        if mask_type.dtype != np.bool_:
            raise ValueError(f"a numpy mask must have dtype bool, got {mask_type.dtype}")
        if mask_type.shape != (q_len, kv_len):
            raise ValueError(
                f"mask shape {mask_type.shape} does not match (q_len, kv_len) = "
                f"{(q_len, kv_len)}"
            )
        return mask_type
    if isinstance(mask_type, str) and mask_type in MASK_TYPES:
        return None
    if isinstance(mask_type, jax.Array):
        raise ValueError(
            "mask_type must be a host numpy bool array, not a jax Array: block sparsity is "
            "planned on the host"
        )
    raise ValueError(
        f"mask_type must be 'causal', 'full' or a numpy bool array, got {mask_type!r}"
    )


def _check_window(window: Any) -> None:
    if window is None:
        return
    if isinstance(window, bool) or not isinstance(window, int | np.integer):
        raise ValueError(f"sliding_window_size must be an int or None, got {window!r}")
    if window < 0:
        raise ValueError(f"sliding_window_size must be >= 0, got {window}")


# ----------------------------------------------------------------------------- custom VJP


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _attention(cfg: KernelConfig, q, k, v, segs, tables):
    return hstu_forward(cfg, q, k, v, segs, tables)


def _attention_fwd(cfg: KernelConfig, q, k, v, segs, tables):
    return hstu_forward(cfg, q, k, v, segs, tables), (q, k, v, segs, tables)


def _attention_bwd(cfg: KernelConfig, res, do):
    q, k, v, segs, tables = res
    dq, dk, dv = hstu_backward(cfg, q, k, v, do, segs, tables)
    return dq, dk, dv, None, None


_attention.defvjp(_attention_fwd, _attention_bwd)


@functools.partial(jax.jit, static_argnums=0)
def run_planned(cfg: KernelConfig, q, k, v, q_segment_ids, kv_segment_ids, tables):
    """The jitted kernel on ``[B, L, H, D]`` inputs with precomputed ``tables``."""
    segs = None
    if cfg.has_segments:
        qs = q_segment_ids.astype(jnp.int32)
        ks = kv_segment_ids.astype(jnp.int32)
        (b, lq), lk = qs.shape, ks.shape[1]
        segs = {
            "q_lanes": jax.lax.broadcast_in_dim(qs, (b, lq, NUM_LANES), (0, 1)),
            "kv_sublanes": jax.lax.broadcast_in_dim(ks, (b, NUM_SUBLANES, lk), (0, 2)),
            "q_sublanes": jax.lax.broadcast_in_dim(qs, (b, NUM_SUBLANES, lq), (0, 2)),
            "kv_lanes": jax.lax.broadcast_in_dim(ks, (b, lk, NUM_LANES), (0, 1)),
        }
    heads_major = functools.partial(jnp.swapaxes, axis1=1, axis2=2)
    out = _attention(cfg, heads_major(q), heads_major(k), heads_major(v), segs, tables)
    return heads_major(out)


def plan(
    mask_type: Any,
    q: Any,
    k: Any,
    v: Any,
    *,
    q_segment_ids: Any = None,
    kv_segment_ids: Any = None,
    sliding_window_size: int | None = None,
    scale: float | None = None,
    interpret: Any = False,
    **block_sizes: int | None,
) -> tuple[KernelConfig, dict[str, np.ndarray]]:
    """Validates one call's arguments and returns its static config and host tables."""
    _check_inputs(q, k, v)
    batch, q_len, _, head_dim = q.shape
    kv_len = k.shape[1]
    mask = _check_mask_type(mask_type, q_len, kv_len)
    has_segments = _check_segments(q_segment_ids, kv_segment_ids, batch, q_len, kv_len)
    _check_window(sliding_window_size)
    if scale is None:
        scale = 1.0 / math.sqrt(head_dim)
    elif not math.isfinite(scale):
        raise ValueError(f"scale must be finite, got {scale}")
    blocks = _resolve_blocks(q_len, kv_len, block_sizes)
    causal = isinstance(mask_type, str) and mask_type == "causal"
    window = None if sliding_window_size is None else int(sliding_window_size)
    tables = cached_tables(mask, causal, window, q_len, kv_len, blocks)
    cfg = KernelConfig(
        scale=float(scale), q_len=q_len, kv_len=kv_len, has_segments=has_segments,
        has_mask=mask is not None, interpret=interpret, **blocks,
    )
    return cfg, tables


def hstu_attention(
    mask_type: str | np.ndarray,
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    q_segment_ids: jax.Array | None = None,
    kv_segment_ids: jax.Array | None = None,
    sliding_window_size: int | None = None,
    scale: float | None = None,
    block_q: int | None = None,
    block_kv: int | None = None,
    block_kv_compute: int | None = None,
    block_q_dkv: int | None = None,
    block_kv_dkv: int | None = None,
    block_kv_dkv_compute: int | None = None,
    interpret: Any = False,
) -> jax.Array:
    """Block-sparse HSTU pointwise attention (Pallas TPU kernel, custom VJP).

    ``out = (M * silu(scale * q k^T) / q_len) v`` per batch and head, with
    ``M`` = the mask type (``"causal"``: key j <= query i, top-left aligned
    for any lengths; ``"full"``; or a numpy bool ``[q_len, kv_len]``) AND
    ``|i - j| <= sliding_window_size`` AND equal segment ids. Masked scores
    contribute exactly 0; a query row that sees no key outputs 0.

    Args:
      mask_type: ``"causal"``, ``"full"`` or a numpy bool array ``[q_len, kv_len]``.
      q: ``[batch, q_len, heads, head_dim]``; k, v: ``[batch, kv_len, heads, head_dim]``.
      q_segment_ids, kv_segment_ids: int ``[batch, q_len]`` / ``[batch, kv_len]``, both or none.
      sliding_window_size: inclusive window ``w >= 0`` or None.
      scale: logit scale, default ``1/sqrt(head_dim)``.
      block_q, block_kv, block_kv_compute: forward blocks (multiples of 128 dividing
        the lengths; compute divides memory); defaults ``min(512, length)`` and block_kv.
      block_q_dkv, block_kv_dkv, block_kv_dkv_compute: the backward's blocks, same rules.
      interpret: Pallas ``interpret=`` value (True, TPU InterpretParams, or False).

    Raises:
      ValueError: on shapes, masks, segment ids, windows or block sizes it cannot honour.
    """
    cfg, tables = plan(
        mask_type, q, k, v, q_segment_ids=q_segment_ids, kv_segment_ids=kv_segment_ids,
        sliding_window_size=sliding_window_size, scale=scale, interpret=interpret,
        block_q=block_q, block_kv=block_kv, block_kv_compute=block_kv_compute,
        block_q_dkv=block_q_dkv, block_kv_dkv=block_kv_dkv,
        block_kv_dkv_compute=block_kv_dkv_compute,
    )
    return run_planned(cfg, q, k, v, q_segment_ids, kv_segment_ids, tables)
