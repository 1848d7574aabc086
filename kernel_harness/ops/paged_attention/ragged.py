"""Ragged paged attention: a batch of sequences, each with its own query and key lengths
(a prefill chunk or a decode step appended to its cache), its queries packed one after
another. Per sequence the keys are given in order (the family gathers them through its
page layout), the causal (and window) mask is bottom-right aligned, and the attention op's
softmax runs in float32 at Precision.HIGHEST (the op's contract: :mod:`.semantics`).
Nothing here comes from a kernel."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.ops.attention.reference import attend, visibility

_HI = jax.lax.Precision.HIGHEST

#: What a ragged paged attention kernel does (``Family.capabilities``): causal over each
#: sequence's own lengths, decode steps and prefill chunks from a paged cache, a sliding
#: window, a soft cap, a scale, grouped or shared kv heads.
CAPABILITIES: frozenset[str] = frozenset({
    "causal", "local-window", "gqa", "mqa", "soft-cap", "sm-scale", "q-len-ne-kv-len",
    "ragged-lengths", "decode", "paged"})


def allowed(q_len: int, kv_len: int, window: int | None, causal: bool = True
            ) -> np.ndarray:
    """bool [q_len, kv_len]: query j (at position kv_len - q_len + j) sees key t when
    t <= its position (``causal``) and, with a window, t > position - window (the
    attention op's dense-mask builder, bottom-right aligned)."""
    return visibility(q_len, kv_len, causal=causal, q_offset=kv_len - q_len, xp=np,
                      window=None if window is None else (window - 1, None))[0, 0]


def attend_sequence(q, k, v, mask, *, sm_scale: float, soft_cap: float | None, ratio: int,
                    sinks=None, precision=_HI):
    """out [q_len, q_heads, head_dim] by the attention op's softmax (query head h reads
    kv head h // ratio; ``ratio`` is implied by the shapes and kept as the cache key;
    ``sinks`` [q_heads]: the op's attention sinks, one extra logit per head)."""
    del ratio
    out, _ = attend(q[None], k[None], v[None], mask[None, None], sm_scale,
                          layout="bqhd", soft_cap=soft_cap, sinks=sinks, precision=precision)
    return out[0]


#: ``attend_sequence`` as one program per sequence shape. Run eagerly, its dozen jnp ops were each
#: compiled for every sequence's (q_len, kv_len): 352 small programs and 5.6 s of compiling
#: in a 6-example check, against 8 kernel programs. Same operations and precision; the
#: exported script keeps the eager ``attend_sequence`` (its reference agrees to 1e-6).
_attend = jax.jit(attend_sequence,
                  static_argnames=("sm_scale", "soft_cap", "ratio", "precision"))


def ragged_attention(q_all: np.ndarray, kv: Iterable[tuple[np.ndarray, np.ndarray]],
                     q_lens: Iterable[int], kv_lens: Iterable[int], *, sm_scale: float,
                     soft_cap: float | None, window: int | None,
                     value_dim: int | None = None, sinks: np.ndarray | None = None,
                     causal: bool = True, dtype: str = "float32", precision: Any = _HI,
                     device: jax.Device | None = None) -> np.ndarray:
    """out float32 [max_tokens, q_heads, value_dim] (``value_dim`` defaults to q_all's
    head_dim): sequence i's ``q_lens[i]`` queries (packed from row 0 on) attend over its
    keys ``kv[i][0]`` (float32 [kv_lens[i], kv_heads, head_dim]) and values ``kv[i][1]``
    ([kv_lens[i], kv_heads, value_dim]) by :func:`allowed` (``causal`` False: the window
    alone); rows past the sequences' queries are left 0. ``sinks`` [q_heads]: an
    attention-sink logit per query head (not scaled, capped or masked: it takes softmax
    weight and has no value). ``dtype``, ``precision``, ``device``: the calibrated judge's
    low-precision twin (operands in ``dtype``, that dot precision, on that device)."""
    q_all = np.asarray(q_all, np.float32)
    out = np.zeros((*q_all.shape[:2], value_dim or q_all.shape[2]), np.float32)
    dt = jnp.dtype(dtype)
    start = 0
    with jax.default_device(device or jax.devices("cpu")[0]):
        for (k, v), q_len, kv_len in zip(kv, q_lens, kv_lens, strict=True):
            o = _attend(jnp.asarray(q_all[start:start + q_len], dt), jnp.asarray(k, dt),
                        jnp.asarray(v, dt), jnp.asarray(allowed(q_len, kv_len, window, causal)),
                        sm_scale=sm_scale, soft_cap=soft_cap,
                        ratio=q_all.shape[1] // k.shape[1],
                        sinks=None if sinks is None else jnp.asarray(sinks, jnp.float32),
                        precision=precision)
            out[start:start + q_len] = np.asarray(o, np.float32)
            start += q_len
    return out
