"""The rotary op's reference, from the definition: for dims i < rotary_dim / 2 the
frequency is base ** (-2 i / rotary_dim), a token at position p rotates its pair i by the
angle p * inv_freq[i] (computed in float64, so large positions keep their angle), pairs
being (i, i + rotary_dim / 2) (``split``, rotate-half) or (2i, 2i + 1) (``interleaved``);
dims past rotary_dim pass through. The rotation runs in float32 (HIGHEST is moot: no
dots), and dx is the ``jax.vjp`` of it. Plain numpy / jnp of arrays and plain values:
exported scripts embed this source."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

#: The pairings: rotate-half (dims i and i + r/2) and interleaved (dims 2i and 2i + 1).
PAIRINGS = ("split", "interleaved")


def rotary_tables(positions: np.ndarray, rotary_dim: int, base: float
                  ) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin [len(positions), rotary_dim / 2] of the angles positions * inv_freq,
    in float64."""
    inv_freq = base ** (-np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim)
    angles = np.asarray(positions, np.float64)[:, None] * inv_freq[None, :]
    return np.cos(angles), np.sin(angles)


def rotate(x: jax.Array, cos: jax.Array, sin: jax.Array, pairing: str, rotary_dim: int
           ) -> jax.Array:
    """x [tokens, heads, head_dim] rotated by the per-token cos, sin [tokens, rotary_dim / 2]
    (float32), pairs as ``pairing`` says; dims past rotary_dim unchanged."""
    half = rotary_dim // 2
    c, s = cos[:, None, :], sin[:, None, :]
    if pairing == "split":
        x1, x2 = x[..., :half], x[..., half:rotary_dim]
        rotated = jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
    elif pairing == "interleaved":
        x1, x2 = x[..., 0:rotary_dim:2], x[..., 1:rotary_dim:2]
        rotated = jnp.stack([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1).reshape(
            *x.shape[:-1], rotary_dim)
    else:
        raise ValueError(f"pairing must be one of {PAIRINGS}, got {pairing!r}")
    return jnp.concatenate([rotated, x[..., rotary_dim:]], axis=-1)


def rotary(x: np.ndarray, dout: np.ndarray | None, positions: np.ndarray, *, pairing: str,
           rotary_dim: int, base: float) -> dict[str, np.ndarray]:
    """``out`` (and ``dx``, the vjp at ``dout``, unless None) as float32 numpy: x rotated by
    the definition's angles at ``positions``."""
    cos, sin = (jnp.asarray(t, jnp.float32) for t in rotary_tables(positions, rotary_dim,
                                                                     base))
    out, vjp = jax.vjp(lambda a: rotate(a, cos, sin, pairing, rotary_dim),
                       jnp.asarray(x, jnp.float32))
    result = {"out": np.asarray(out, np.float32)}
    if dout is not None:
        result["dx"] = np.asarray(vjp(jnp.asarray(dout, jnp.float32))[0], np.float32)
    return result
