"""Adapter running gdn2-pallas's fused Pallas path, ``gdn2_pallas_forward_trainable``
(forward kernels A, B, C and the backward's B2, B3, B4 under a custom VJP), forward and
``jax.vjp``.

gdn2-pallas 0.1.1 (module ``atomic_ops``) needs Python >= 3.10 and jax < 0.13, so it runs
on both of the harness's stacks; it is installed ``--no-deps``
(``requirements/kernel-libraries.txt``). Where it is not installed the family has no
backend and ``kernel-harness list`` says what to install.

The implementation is called with the library's own signature, so the library's public
``gdn2_forward_trainable`` is a drop-in ``--impl``: off a TPU it silently returns its
pure-JAX chunked reference, which the kernel count fails. Its kernels take no
``interpret`` argument (kernel A's and B4's exist but the pipeline never passes them): on
every CPU backend they run under :meth:`Backend.forcing_interpret`.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import math
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.core.case import Arrays
from kernel_harness.families import gpu_common
from kernel_harness.families.gdn2_pallas.cases import Gdn2Case
from kernel_harness.records.adapter import TPU_BACKENDS, Adapter, expect_shape

#: The release the family was written and checked against, and how to install it.
TESTED_VERSION = "0.1.1"
INSTALL = (f"gdn2-pallas {TESTED_VERSION} (Python >= 3.10, jax < 0.13): pip install --no-deps "
           f"gdn2-pallas=={TESTED_VERSION} (requirements/kernel-libraries.txt)")
#: The library's clip at every kernel boundary (``KernelConfig.clip``), set past any value
#: a drawn case reaches so that clipping is no part of what is judged (its default 1e4).
CLIP = 1e30
#: The modules the kernels live in, imported with the family where installed (so a mutated
#: copy, ``kernel-harness mutate``, is the one the family binds).
MODULE = "atomic_ops"


def available() -> bool:
    """Whether gdn2-pallas is installed (finds it; imports nothing)."""
    try:
        return importlib.util.find_spec(MODULE) is not None
    except (ImportError, ValueError):
        return False


atomic_ops: Any = importlib.import_module(MODULE) if available() else None


def library() -> Any:
    """The ``atomic_ops`` module; an ImportError saying what to install where it is not."""
    if atomic_ops is None:
        raise ImportError(f"gdn2-pallas is not installed: {INSTALL}")
    return atomic_ops


@contextlib.contextmanager
def backward_clip(clip: float) -> Iterator[None]:
    """The backward's final gradient clip (``atomic_ops.gdn2_pipeline._FINAL_CLIP``, 1e4,
    not in ``KernelConfig``) set to ``clip`` while a program is traced: no drawn gradient
    reaches 1e4, but the harness's kernel poisoning fills the kernels with values whose
    gradients do, and a clip saturating under both fills reads as "kernel result unused"."""
    pipeline = library().gdn2_pipeline
    before = pipeline._FINAL_CLIP
    pipeline._FINAL_CLIP = clip
    try:
        yield
    finally:
        pipeline._FINAL_CLIP = before


def kernel_config(case: Gdn2Case) -> Any:
    """The library's ``KernelConfig`` for ``case``: bt = chunk_size, bc = bt / 2, mb =
    micro_block, no damping of the WY solve (``wy_eps=0``: the exact problem) and the clip
    at :data:`CLIP`."""
    return library().KernelConfig(bt=case.chunk_size, bc=case.chunk_size // 2,
                                  mb=case.micro_block, clip=CLIP, wy_eps=0.0)


def gdn2_pallas_forward_trainable(q: jax.Array, k: jax.Array, v: jax.Array, w: jax.Array,
                                  b: jax.Array, g: jax.Array, scale: float,
                                  h0: jax.Array | None = None, config: Any = None
                                  ) -> tuple[jax.Array, jax.Array]:
    """The default implementation: ``atomic_ops.gdn2_pallas_forward_trainable``, the fused
    Pallas path (no fallback), looked up at call time."""
    return library().gdn2_pallas_forward_trainable(q, k, v, w, b, g, scale, h0=h0,
                                                    config=config)


IMPL_SIGNATURE = (
    "gdn2_pallas_forward_trainable(q, k, v, w, b, g, scale, h0=None, config=KernelConfig) "
    "-> (out, final_state); q, k, v, w, b, g: [B, L, H, 128] (note the order: w, b, g), "
    "scale a float (1/sqrt(128)), h0: float32 [B, H, 128, 128] or None, config: "
    "atomic_ops.KernelConfig(bt, bc, mb, clip, wy_eps); out [B, L, H, 128] and final_state "
    "[B, H, 128, 128] float32; differentiable with jax.vjp in q, k, v, w, b, g and h0"
)

_DIFF = ("q", "k", "v", "g", "b", "w")


def _build(impl: Callable[..., Any], case: Gdn2Case, interpret: Any) -> Callable[..., Any]:
    config = kernel_config(case)
    scale = 1.0 / math.sqrt(case.key_dim)
    with_h0 = case.initial_state

    def fn(arrays):
        def f(q, k, v, g, b, w, *h0):
            return impl(q, k, v, w, b, g, scale, h0[0] if h0 else None, config)

        # The state is float32 in the library (its scan carry): h0 goes in, and dh0 comes
        # out, as float32 whatever the inputs' dtype.
        wrt = [arrays[n] for n in _DIFF] + (
            [arrays["h0"].astype(jnp.float32)] if with_h0 else [])
        (out, final), vjp = jax.vjp(f, *wrt)
        grads = vjp((arrays["dout"].astype(out.dtype), arrays["dstate"].astype(final.dtype)))
        named = {"out": out, "final_state": final}
        named.update({f"d{n}": d for n, d in zip((*_DIFF, "h0"), grads, strict=False)})
        # No initial state: dh0 is zeros on both sides, reported not compared.
        named.setdefault("dh0", jnp.zeros_like(arrays["dstate"], jnp.float32))
        return named

    return gpu_common.jit(fn, cpu=interpret is not False)


def run(impl: Callable[..., Any], case: Gdn2Case, inputs: Arrays, backend: Backend) -> Arrays:
    """Every output of ``impl`` on ``backend``: out, final_state and the gradients, shape-
    checked, as float32 numpy. Traced and run under the backend's forced TPU interpret mode
    (the kernels have no interpret switch; on ``tpu`` they compile)."""
    program = gpu_common.cached_program(impl, case, backend, _build)
    with backend.forcing_interpret(), backward_clip(CLIP), jax.default_device(backend.device):
        placed = {n: jax.device_put(x, backend.device) for n, x in inputs.items()}
        outputs = jax.block_until_ready(program(placed))
    shapes = {"out": inputs["dout"].shape, "final_state": inputs["dstate"].shape,
              "dh0": inputs["dstate"].shape, **{f"d{n}": inputs[n].shape for n in _DIFF}}
    for name, got in outputs.items():
        expect_shape(f"gdn2-pallas ({name})", got, shapes[name])
    return {n: np.asarray(x, np.float32) for n, x in outputs.items()}


#: How the family calls its kernel; no backend where gdn2-pallas is not installed.
ADAPTER = Adapter(kernel=gdn2_pallas_forward_trainable, impl_signature=IMPL_SIGNATURE,
                  run=run, backends=TPU_BACKENDS if available() else frozenset())
