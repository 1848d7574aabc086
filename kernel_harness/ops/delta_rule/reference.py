"""The delta-rule op's reference: the recurrence token by token, from its definition.

Per batch row and value head, with the state S [K, V] (float32) and at token t:

    S   <- 0 where t starts a document other than the row's first (h0 applies to the first)
    S   <- exp(g_t)[:, None] * S                     (decay per key channel; g_t <= 0)
    e_t  = S^T (b_t * k_t)                           (what the state recalls for k_t)
    S   <- S + k_t (w_t * v_t - e_t)^T               (delta rule: erase b, write w)
    o_t  = S^T q_t

with q_t = scale q / sqrt(|q|^2 + 1e-6) and k_t = k / sqrt(|k|^2 + 1e-6) under
``qk_l2norm`` (else q_t = scale q, k as given), scale = 1 / sqrt(K), and value head j reading
key head j // (value_heads / key_heads) (its q, k, g and b). Outputs: ``out`` [B, L, Hv, V],
``final_state`` [B, Hv, K, V] and, by ``jax.vjp`` of this scan with the cotangents ``dout``
and ``dstate``, the gradients of q, k, v, g, b, w and h0. This is GDN-2's form; Gated
DeltaNet and KDA are the special cases b = w = beta (per head, or per channel), DeltaNet
g = 0.

It is a ``jax.lax.scan`` over tokens in float32 at HIGHEST precision, never chunked: a
chunked kernel's cumulative decays, triangular solve and inter-chunk state are nowhere in
it. ``tests/ops/test_delta_rule.py`` checks it against a float64 numpy loop and its
gradients against finite differences.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.core.case import Arrays
from kernel_harness.ops.delta_rule.cases import DeltaRuleCase

#: The epsilon under the square root of the L2 normalisation of q and k.
L2_EPS = 1e-6


def normalised(x: jax.Array) -> jax.Array:
    """``x`` over its L2 norm along the last axis (``qk_l2norm``; :data:`L2_EPS` under the
    square root)."""
    return x / jnp.sqrt(jnp.sum(x * x, axis=-1, keepdims=True) + L2_EPS)


def recurrence(q: jax.Array, k: jax.Array, v: jax.Array, g: jax.Array, b: jax.Array,
               w: jax.Array, h0: jax.Array, starts: jax.Array, *,
               qk_l2norm: bool) -> tuple[jax.Array, jax.Array]:
    """``(out [B, L, Hv, V], final_state [B, Hv, K, V])`` in float32, token by token.

    q, k, g, b: [B, L, Hk, K]; v, w: [B, L, Hv, V]; h0: [B, Hv, K, V]; starts: bool [B, L],
    True where a token starts a document whose state begins at zero."""
    hp = jax.lax.Precision.HIGHEST
    q, k, v, g, b, w, h0 = (x.astype(jnp.float32) for x in (q, k, v, g, b, w, h0))
    group = v.shape[2] // q.shape[2]
    scale = 1.0 / math.sqrt(q.shape[-1])
    if qk_l2norm:
        q, k = normalised(q), normalised(k)
    q = q * scale
    q, k, g, b = (jnp.repeat(x, group, axis=2) for x in (q, k, g, b))

    def step(state, token):
        q_t, k_t, v_t, g_t, b_t, w_t, start = token
        state = jnp.where(start[:, None, None, None], 0.0, state)
        state = jnp.exp(g_t)[..., None] * state
        recalled = jnp.einsum("bhkv,bhk->bhv", state, b_t * k_t, precision=hp)
        state = state + k_t[..., None] * (w_t * v_t - recalled)[..., None, :]
        return state, jnp.einsum("bhkv,bhk->bhv", state, q_t, precision=hp)

    tokens = tuple(jnp.swapaxes(x, 0, 1) for x in (q, k, v, g, b, w, starts))
    final, out = jax.lax.scan(step, h0, tokens)
    return jnp.swapaxes(out, 0, 1), final


def document_starts(case: DeltaRuleCase) -> np.ndarray:
    """bool [batch, seq_len]: True at the first token of every document but a row's first."""
    ids = case.segment_ids()
    starts = np.zeros_like(ids, dtype=bool)
    starts[:, 1:] = ids[:, 1:] != ids[:, :-1]
    return starts


def reference(case: DeltaRuleCase, inputs: Arrays, *, gradients: bool = True) -> Arrays:
    """Every output of ``case`` from its (rounded) inputs: out, final_state and the
    gradients dq, dk, dv, dg, db, dw (and dh0 with an initial state), float32 numpy;
    without ``gradients``, out and final_state only (a forward-only family's reference:
    ``functools.partial(delta_rule_reference, gradients=False)``)."""
    names = ("q", "k", "v", "g", "b", "w", "h0")
    h0 = inputs.get("h0")
    if h0 is None:
        h0 = np.zeros((case.batch, case.value_heads, case.key_dim, case.value_dim), np.float32)
    # Every input in float32, h0 too: its gradient is the reference's dh0, exact in float32
    # (a bfloat16 case's h0 differentiated in bfloat16 rounded dh0 to bfloat16).
    arrays = [jnp.asarray(inputs[n], jnp.float32) for n in names[:-1]] + [
        jnp.asarray(h0, jnp.float32)]
    starts = jnp.asarray(document_starts(case))

    def f(*xs):
        return recurrence(*xs, starts, qk_l2norm=case.qk_l2norm)

    if not gradients:
        out, final = f(*arrays)
        return {"out": np.asarray(out, np.float32), "final_state": np.asarray(final, np.float32)}
    (out, final), vjp = jax.vjp(f, *arrays)
    grads = vjp((jnp.asarray(inputs["dout"], jnp.float32),
                 jnp.asarray(inputs["dstate"], jnp.float32)))
    outputs = {"out": out, "final_state": final}
    outputs.update({f"d{n}": d for n, d in zip(names, grads, strict=True)})
    if not case.initial_state:
        del outputs["dh0"]
    return {n: np.asarray(x, np.float32) for n, x in outputs.items()}


#: The public name of :func:`reference` (``from kernel_harness import delta_rule_reference``).
delta_rule_reference = reference


def reference_with_dh0(case: DeltaRuleCase, inputs: Arrays) -> Arrays:
    """:func:`reference`, with ``dh0`` zeros where the case has no initial state: the
    reference of an adapter that always returns ``dh0`` (reported there, not compared)."""
    outputs = reference(case, inputs)
    if "dh0" not in outputs:
        outputs["dh0"] = 0.0 * inputs["dstate"].astype("float32")
    return outputs
