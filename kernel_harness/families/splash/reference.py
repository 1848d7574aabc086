"""The independent splash reference: plain-jnp softmax attention at HIGHEST precision
in float32, over dense masks built from the case description.

Nothing here uses splash's own masks, mask info or reference function: every
mask kind is an index formula on a dense grid (:mod:`kernel_harness.families.splash.masks`).

:func:`low_precision_reference` is the same math with the inputs in the case's own dtype
at the backend's default matmul precision, on the backend's device: the yardstick of the
calibrated judge (README "Calibrated bounds").
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.families.splash.cases import SplashCase
from kernel_harness.families.splash.masks import allowed_mask
from kernel_harness.ops.attention.reference import attend

_HIGHEST = jax.lax.Precision.HIGHEST


def attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    sinks: jax.Array | None,
    allowed: jax.Array,
    *,
    soft_cap: float | None,
    precision: jax.lax.Precision | None = _HIGHEST,
) -> tuple[jax.Array, jax.Array]:
    """The attention op's softmax (:func:`~kernel_harness.ops.attention.reference.attend`)
    in splash's contract: q already scaled, soft cap, sinks, the denominator applied to
    the output (``normalize="output"``). q: [b, hq, q, d]; k, v: [b, hkv, kv, d];
    allowed: [hq, q, kv]; sinks: [hq] or None. Returns ``(out, lse)``."""
    return attend(q, k, v, allowed[None], 1.0, layout="bhqd", soft_cap=soft_cap,
                  sinks=sinks, normalize="output", precision=precision)


@functools.lru_cache(maxsize=64)
def _program(soft_cap: float | None, has_sinks: bool, precision=_HIGHEST):
    def program(q, k, v, sinks, allowed, do):
        def f(q, k, v, sinks):
            return attention(q, k, v, sinks if has_sinks else None, allowed, soft_cap=soft_cap,
                             precision=precision)

        (out, lse), vjp = jax.vjp(f, q, k, v, sinks)
        dq, dk, dv, dsinks = vjp((do, jnp.zeros_like(lse)))
        # dsinks = -sum over rows of p_sink * (do . out): a sum that can cancel hundreds of
        # times over, so its rounding error follows the summed terms' size, not its own.
        p_sink = jnp.exp(sinks[None, :, None] - lse)
        terms = jnp.sum(jnp.abs(p_sink * jnp.sum(do * out, axis=-1)), axis=(0, 2))
        return {"out": out, "dq": dq, "dk": dk, "dv": dv, "lse": lse, "dsinks": dsinks,
                "dsinks:magnitude": terms}

    return jax.jit(program)


def _run(case: SplashCase, inputs: dict[str, np.ndarray], dtype, device: jax.Device,
         precision) -> dict[str, np.ndarray]:
    cast = lambda name: jnp.asarray(inputs[name], dtype)  # noqa: E731
    with jax.default_device(device):
        sinks = cast("sinks") if case.sinks else jnp.zeros((case.num_q_heads,), dtype)
        res = _program(case.soft_cap, case.sinks, precision)(
            cast("q"), cast("k"), cast("v"), sinks, jnp.asarray(allowed_mask(case)), cast("do")
        )
        res = {name: np.asarray(x, np.float32) for name, x in res.items()}
    if not case.sinks:
        res["dsinks"] = np.zeros((0,), np.float32)
        res["dsinks:magnitude"] = np.zeros((0,), np.float32)
    return res


def reference(case: SplashCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every checked output (out, dq, dk, dv, lse, dsinks) from the dtype-rounded inputs,
    computed in float32; ``dsinks`` is empty (shape (0,)) when the case has no sinks."""
    return _run(case, inputs, jnp.float32, jax.devices("cpu")[0], _HIGHEST)


def low_precision_reference(case: SplashCase, inputs: dict[str, np.ndarray],
                            backend: Backend) -> dict[str, np.ndarray]:
    """The same outputs computed in ``case.dtype`` at the default matmul precision on
    ``backend``'s device (returned as float32 arrays)."""
    return _run(case, inputs, jnp.dtype(case.dtype), backend.device, None)
