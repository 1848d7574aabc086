"""Planted wrong kernels for ``kernel-harness bench``: the first two must be reported FAIL
by the correctness pre-check and never timed; the cheats below pass the pre-check and
must be reported FAIL once their timed results are judged."""

from __future__ import annotations

import functools

import jax
import numpy as np

from kernel_harness.families.sdpa.kernel import xla_sdpa


def sdpa_ignores_causal(query, key, value, bias=None, mask=None, **opts):
    """Attends to every key: the benchmark case is causal, so the output is wrong."""
    return xla_sdpa(query, key, value, bias, mask, **{**opts, "is_causal": False})


def sdpa_crashes(query, key, value, bias=None, mask=None, **opts):
    """Raises: a crash in the pre-check is a FAIL too."""
    raise RuntimeError("planted crash")


# Implementations that pass the pre-check (its first call computes the right answer) but
# whose timed results are not computed from the timed inputs: a host-side cache behind
# ``jax.pure_callback``, the gradients taken from XLA so that the pre-check's backward
# passes too. ``forget()`` empties the caches (a test's first call must be the pre-check's).
_BY_SHAPE: dict[tuple, np.ndarray] = {}
_LAST: list[np.ndarray] = []


def forget() -> None:
    """Empties the planted caches."""
    _BY_SHAPE.clear()
    _LAST.clear()


def _numpy_attention(q, k, v, is_causal):
    q32, k32, v32 = (np.asarray(x, np.float32) for x in (q, k, v))
    logits = np.einsum("bqhd,bkhd->bhqk", q32, k32) * q.shape[-1] ** -0.5
    if is_causal:
        logits = np.where(np.tril(np.ones(logits.shape[-2:], bool)), logits, -np.inf)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    return np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), v32).astype(q.dtype)


def _memo_per_shape(q, k, v, is_causal):
    key = (q.shape, k.shape, v.shape, str(q.dtype), is_causal)
    if key not in _BY_SHAPE:
        _BY_SHAPE[key] = _numpy_attention(q, k, v, is_causal)
    return _BY_SHAPE[key]


def _stale(q, k, v, is_causal):
    fresh = _numpy_attention(q, k, v, is_causal)
    out = _LAST[0] if _LAST and _LAST[0].shape == fresh.shape else fresh
    _LAST[:] = [fresh]
    return out


def _host_backed(host):
    def impl(query, key, value, bias=None, mask=None, **opts):
        @jax.custom_vjp
        def attend(q, k, v):
            return jax.pure_callback(functools.partial(host, is_causal=opts["is_causal"]),
                                     jax.ShapeDtypeStruct(q.shape, q.dtype), q, k, v)

        def fwd(q, k, v):
            return attend(q, k, v), (q, k, v)

        def bwd(res, g):
            return jax.vjp(lambda q, k, v: xla_sdpa(q, k, v, bias, mask, **opts), *res)[1](g)

        attend.defvjp(fwd, bwd)
        return attend(query, key, value)

    return impl


#: Remembers its first result per input shape and returns it for every later input of
#: that shape: the benchmark would time a cache lookup.
sdpa_memoized = _host_backed(_memo_per_shape)

#: Returns the previous call's result (a stale output buffer): right on the pre-check's
#: first call, wrong on every later one.
sdpa_stale = _host_backed(_stale)
