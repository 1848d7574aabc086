"""Adapter running TPU ragged paged attention (forward only: an inference kernel) on a
backend.

The kernel has no ``interpret=`` switch. Both CPU backends run it in **TPU interpret
mode** (the only interpreter that runs a TPU kernel without one): ``interpret`` with
plain settings (zeroed scratch, no race detection, one core; what
:meth:`Backend.forcing_interpret` gives every such kernel), ``tpu-interpret`` with the
harness's diagnostic settings. Either way the TPU interpreter of jax 0.10.2 and 0.12.0.1
cannot run this kernel unextended (reads through a reshaped/bitcast ref, masked stores
to 3-D refs), so interpreted runs happen inside
:func:`kernel_harness.core.compat.interpreter_ext.tpu_interpreter_extensions`; on ``tpu`` the kernel
compiles to Mosaic with nothing extended.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as _rpa

from kernel_harness.core.backends import Backend, BackendUnavailable
from kernel_harness.families.tpu_ragged_paged.cases import RaggedCase
from kernel_harness.spec.adapter import TPU_BACKENDS, Adapter, run_tpu_program

#: The default implementation: the kernel's public (jitted) entry point.
ragged_paged_attention = _rpa.ragged_paged_attention

IMPL_SIGNATURE = (
    "impl(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, *, sm_scale, "
    "sliding_window, soft_cap, num_kv_pages_per_block, num_queries_per_block) -> out; "
    "q: [max_tokens, num_q_heads, head_dim], kv_pages: [total_pages, page_size, "
    "2 * num_kv_heads, head_dim] (K in even, V in odd combined heads), kv_lens: int32 "
    "[max_num_seqs], page_indices: int32 [max_num_seqs, pages_per_seq], cu_q_lens: int32 "
    "[max_num_seqs + 1], num_seqs: int32 [1]; out like q"
)

RAGGED_BACKENDS = TPU_BACKENDS

class KernelSignatureError(RuntimeError):
    """The kernel's keyword arguments are not the layout this adapter knows."""


#: Keyword arguments the adapter passes; the installed kernel must take all of them.
_KWARGS = ("sm_scale", "sliding_window", "soft_cap", "num_kv_pages_per_block",
           "num_queries_per_block")


def check_signature(impl: Callable[..., Any]) -> None:
    """A kernel whose keywords differ from the known layout (jax 0.10.2 and 0.12.0.1
    agree) is an error naming the jax version, never a call with arguments dropped."""
    try:
        params = inspect.signature(impl).parameters
    except (TypeError, ValueError):
        return  # a C callable or partial without a signature: the call itself will say
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    missing = [k for k in _KWARGS if k not in params]
    if missing:
        raise KernelSignatureError(
            f"tpu-ragged-paged: the ragged_paged_attention of jax "
            f"{jax.__version__} takes no {missing}; the harness knows the "
            "signature of jax 0.10.2/0.12.0.1 (kernel_harness/families/tpu_ragged_paged/"
            "kernel.py) - adapt the adapter to this jax"
        )


@functools.lru_cache(maxsize=64)
def _program(impl: Callable[..., Any], key: tuple[Any, ...]) -> Callable[..., Any]:
    """Jitted ``(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs) -> out``."""
    f = dict(key)
    kwargs = {
        "sm_scale": f["sm_scale"], "sliding_window": f["sliding_window"],
        "soft_cap": f["soft_cap"], "num_kv_pages_per_block": f["kv_pages_per_block"],
        "num_queries_per_block": f["queries_per_block"],
    }

    def program(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs):
        return impl(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, **kwargs)

    return jax.jit(program, compiler_options={"xla_backend_optimization_level": 0}
                   if f["interpreted"] else None)


def run(impl: Callable[..., Any], case: RaggedCase, inputs: dict[str, np.ndarray],
        backend: Backend) -> dict[str, np.ndarray]:
    """Runs ``impl`` on ``backend``; returns out (float32, every row; ``valid`` says
    which rows the contract defines)."""
    if backend.name not in RAGGED_BACKENDS:
        raise BackendUnavailable(
            f"tpu-ragged-paged: a TPU Pallas kernel cannot run on backend {backend.name!r}; "
            f"use one of {sorted(RAGGED_BACKENDS)}"
        )
    check_signature(impl)
    key = (*case.static_key(), ("interpreted", backend.is_interpreted))
    names = ("q", "kv_pages", "kv_lens", "page_indices", "cu_q_lens", "num_seqs")
    out = run_tpu_program(_program(impl, key), inputs, names, backend, extended=True)
    return {"out": np.asarray(out, np.float32)}



def traceable(impl: Callable[..., Any] | None, case: RaggedCase, backend: Backend
              ) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The adapter's jitted program as ``f(inputs) -> outputs`` (for TPU lowering: compiled,
    nothing extended)."""
    impl = impl or ragged_paged_attention
    check_signature(impl)
    program = _program(impl, (*case.static_key(), ("interpreted", backend.is_interpreted)))
    names = ("q", "kv_pages", "kv_lens", "page_indices", "cu_q_lens", "num_seqs")

    def f(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"out": program(*(inputs[n] for n in names))}

    return f


#: How the tpu-ragged-paged family calls its kernel.
ADAPTER = Adapter(kernel=ragged_paged_attention, impl_signature=IMPL_SIGNATURE, run=run,
                   backends=RAGGED_BACKENDS)
