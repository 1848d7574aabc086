"""Adapter running tpu-inference's MLA v2 kernel
(``tpu_inference.kernels.mla.v2.kernel.mla_ragged_paged_attention``).

The kernel has no ``interpret`` switch: the CPU backends run it in TPU interpret mode
inside :func:`~kernel_harness.core.compat.interpreter_ext.tpu_interpreter_extensions` (it
reads and writes its cache through reshaped and bitcast refs). Its module imports sympy
(``transpose.py``); without tpu-inference and sympy the family has no backend
(``kernel-harness list`` says what it needs).
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.families import tpu_inference_loader as loader
from kernel_harness.families.tpu_inference_mla_v2.cases import MlaV2Case
from kernel_harness.spec.adapter import (
    INTERPRET_VMEM_BYTES,
    TPU_BACKENDS,
    Adapter,
    expect_shape,
    run_tpu_program,
)

IMPL_SIGNATURE = (
    "impl(ql_nope, q_pe, new_kv_c, new_k_pe, cache_kv, kv_lens, page_indices, cu_q_lens, "
    "distribution, *, sm_scale, sliding_window, soft_cap, chunk_prefill_size, "
    "num_kv_pages_per_block, num_queries_per_block, mixed_q_split, s_dtype, "
    "two_step_flash_attention, p_same_dtype_as_v, vmem_limit_bytes) -> (out, cache_kv); "
    "ql_nope: [q_heads, max_tokens, lkv_dim], q_pe: [max_tokens, q_heads, r_dim], new_kv_c: "
    "[max_tokens, lkv_dim], new_k_pe: [max_tokens, r_dim], cache_kv: [pages, page_size / "
    "packing, packing, lanes(lkv_dim) + lanes(r_dim)]; out: [q_heads, max_tokens, lkv_dim]"
)

#: What the kernel module needs beyond jax.
NEEDS = f"{loader.INSTALL} && pip install sympy"
_AVAILABLE = loader.available() and importlib.util.find_spec("sympy") is not None

#: Where tpu-inference and sympy are installed: the TPU backends; none without them.
MLA_V2_BACKENDS = TPU_BACKENDS if _AVAILABLE else frozenset()

#: The kernel module, imported with the family (so a mutated copy is the one bound).
_MODULES = {"kernel": loader.kernel_module("mla.v2.kernel")} if _AVAILABLE else {}


def mla_ragged_paged_attention(*operands: Any, **options: Any) -> tuple[Any, Any]:
    """The default implementation: the kernel module's entry point."""
    if not _MODULES:
        raise ImportError(f"tpu-inference and sympy are not installed ({NEEDS})")
    return _MODULES["kernel"].mla_ragged_paged_attention(*operands, **options)


_OPERANDS = ("ql_nope", "q_pe", "new_kv_c", "new_k_pe", "cache_kv", "kv_lens",
             "page_indices", "cu_q_lens", "distribution")


@functools.lru_cache(maxsize=64)
def _program(impl: Callable[..., Any], key: tuple[Any, ...]) -> Callable[..., Any]:
    f = dict(key)
    options = dict(
        sm_scale=f["sm_scale"], sliding_window=f["sliding_window"], soft_cap=f["soft_cap"],
        chunk_prefill_size=f["chunk_prefill_size"],
        num_kv_pages_per_block=f["kv_pages_per_block"],
        num_queries_per_block=f["queries_per_block"], mixed_q_split=f["mixed_q_split"],
        s_dtype=jnp.dtype(f["dtype"]), two_step_flash_attention=f["two_step"],
        p_same_dtype_as_v=f["p_like_v"],
        vmem_limit_bytes=INTERPRET_VMEM_BYTES if f["interpreted"] else None)
    return jax.jit(lambda *operands: impl(*operands, **options))


def _program_for(impl: Callable[..., Any], case: MlaV2Case, backend: Backend
                 ) -> Callable[..., Any]:
    return _program(impl, (*case.static_key(), ("interpreted", backend.is_interpreted)))


def traceable(impl: Callable[..., Any] | None, case: MlaV2Case, backend: Backend
              ) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The adapter's program as ``f(inputs) -> outputs`` (for TPU lowering)."""
    program = _program_for(impl or mla_ragged_paged_attention, case, backend)

    def f(inputs: dict[str, Any]) -> dict[str, Any]:
        out, cache = program(*(inputs[n] for n in _OPERANDS))
        return {"out": out, "cache_kv": cache}

    return f


def run(impl: Callable[..., Any], case: MlaV2Case, inputs: dict[str, np.ndarray],
        backend: Backend) -> dict[str, np.ndarray]:
    """``out`` [q_heads, max_tokens, lkv_dim] and the updated ``cache_kv`` (float32)."""
    out, cache = run_tpu_program(_program_for(impl, case, backend), inputs, _OPERANDS,
                                 backend, extended=True)
    expect_shape("tpu-inference-mla-v2", out, inputs["ql_nope"].shape)
    expect_shape("tpu-inference-mla-v2", cache, inputs["cache_kv"].shape)
    return {"out": np.asarray(out, np.float32), "cache_kv": np.asarray(cache, np.float32)}


#: How the tpu-inference-mla-v2 family calls its kernel.
ADAPTER = Adapter(kernel=mla_ragged_paged_attention, impl_signature=IMPL_SIGNATURE, run=run,
                  backends=MLA_V2_BACKENDS)
