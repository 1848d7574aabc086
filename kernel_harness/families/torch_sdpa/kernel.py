"""Adapter: a torch SDPA callable, pinned to one torch kernel, run forward and backward
under JAX through :func:`kernel_harness.core.torch_bridge.torch_function`.

torch is imported on the first call: the family registers and lists without torch, and
has no backend until ``import torch`` can work (``pip install 'kernel-harness[torch]'``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from kernel_harness.core.backends import Backend, BackendUnavailable
from kernel_harness.core.torch_bridge import torch_available, torch_function
from kernel_harness.families.torch_sdpa.cases import TorchSdpaCase
from kernel_harness.records.adapter import Adapter

IMPL_SIGNATURE = (
    "impl(query, key, value, attn_mask=None, *, is_causal: bool, scale: float | None, "
    "enable_gqa: bool) -> out; torch tensors, query (batch, heads, q_len, head_dim), "
    "key/value (batch, kv_heads, kv_len, head_dim), attn_mask bool (True = attend) or "
    "float (added to the scaled logits) of shape (batch, heads, q_len, kv_len) -- "
    "torch.nn.functional.scaled_dot_product_attention without dropout; differentiable by "
    "torch.autograd in query, key, value (and a float attn_mask)"
)

#: ``interpret``: torch on the CPU (JAX on the CPU); ``gpu``: torch on CUDA tensors (the
#: arrays still cross the host: pure_callback). Empty without torch.
TORCH_BACKENDS = frozenset({"interpret", "gpu"}) if torch_available() else frozenset()

_TORCH_DEVICE = {"interpret": "cpu", "gpu": "cuda"}


def torch_sdpa(query, key, value, attn_mask=None, *, is_causal, scale, enable_gqa):
    """The default implementation: ``torch.nn.functional.scaled_dot_product_attention``."""
    import torch  # noqa: PLC0415 - lazy: the family imports without torch

    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale,
        enable_gqa=enable_gqa)


def _pinned(impl: Callable[..., Any], case: TorchSdpaCase, query, key, value, mask):
    """``impl`` on torch tensors, inside ``sdpa_kernel(<case.backend>)``."""
    from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415

    kernel = {"math": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION}[case.backend]
    with sdpa_kernel(kernel):
        return impl(query, key, value, mask, is_causal=case.is_causal, scale=case.scale,
                    enable_gqa=case.enable_gqa)


def mask_has_gradient(case: TorchSdpaCase) -> bool:
    """torch differentiates a float mask (the problem's bias) only in the math kernel (CPU
    flash: "No available kernel" once the mask requires grad)."""
    return case.bias is not None and case.backend == "math"


def run(impl: Callable[..., Any], case: TorchSdpaCase, inputs: dict[str, np.ndarray],
        backend: Backend) -> dict[str, np.ndarray]:
    """out, dq, dk, dv and dmask (zeros (1, 1, 1, 1) when torch gives none), float32."""
    if backend.name not in TORCH_BACKENDS:
        raise BackendUnavailable(
            f"torch-sdpa: backend {backend.name!r} unavailable "
            + ("(torch is not importable: pip install 'kernel-harness[torch]')"
               if not TORCH_BACKENDS else f"(use one of {sorted(TORCH_BACKENDS)})"))
    diff = (0, 1, 2, 3) if mask_has_gradient(case) else (0, 1, 2)
    f = torch_function(functools.partial(_pinned, impl, case), diff_argnums=diff,
                       device=_TORCH_DEVICE[backend.name])
    args = [jax.device_put(inputs[n], backend.device) for n in ("query", "key", "value")]
    mask = inputs.get("mask")
    mask = None if mask is None else jax.device_put(mask, backend.device)
    out, vjp = jax.vjp(lambda q, k, v, m: f(q, k, v, m), *args, mask)
    dq, dk, dv, dmask = vjp(jax.device_put(inputs["do"], backend.device))
    if not mask_has_gradient(case):
        dmask = np.zeros((1, 1, 1, 1), np.float32)
    result = {"out": out, "dq": dq, "dk": dk, "dv": dv, "dmask": dmask}
    return {k: np.asarray(jax.block_until_ready(v), np.float32) for k, v in result.items()}


#: How the torch-sdpa family calls its kernel.
ADAPTER = Adapter(kernel=torch_sdpa, impl_signature=IMPL_SIGNATURE, run=run,
                   backends=TORCH_BACKENDS)
