"""Adapter running ``jax.nn.dot_product_attention`` and its vjp on a backend.

SDPA has no Pallas kernel: on the ``interpret`` backend it is plain XLA on the CPU (the
name only means "the CPU backend of this harness"), on ``tpu``/``gpu`` it is XLA there.
``implementation="cudnn"`` exists only on GPUs; use :func:`cudnn_sdpa` as ``--impl`` there.
An ``--impl`` wrapping a Pallas kernel of its own asks the backend from
``kernel_harness.current_backend()`` (its call has no ``interpret=``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.core.backends import Backend, BackendUnavailable
from kernel_harness.families.sdpa.cases import SdpaCase
from kernel_harness.records.adapter import Adapter, traced_run

IMPL_SIGNATURE = (
    "impl(query, key, value, bias=None, mask=None, *, scale: float | None, is_causal: bool, "
    "query_seq_lengths, key_value_seq_lengths, local_window_size: tuple[int, int] | None) "
    "-> out; query (batch, q_len, heads, head_dim), key/value (batch, kv_len, kv_heads, "
    "head_dim) -- jax.nn.dot_product_attention without `implementation`; differentiable in "
    "query, key, value and bias"
)

SDPA_BACKENDS = frozenset({"interpret", "tpu", "gpu"})


def xla_sdpa(query, key, value, bias=None, mask=None, **options):
    """The default implementation: ``jax.nn.dot_product_attention(implementation="xla")``."""
    return jax.nn.dot_product_attention(query, key, value, bias, mask, implementation="xla",
                                        **options)


def cudnn_sdpa(query, key, value, bias=None, mask=None, **options):
    """``implementation="cudnn"`` (GPU only; cuDNN supports a subset of cases and raises
    on the others, e.g. float32 inputs or a right window without causal)."""
    if jax.default_backend() != "gpu":
        raise BackendUnavailable("cudnn_sdpa runs only on the gpu backend")
    return jax.nn.dot_product_attention(query, key, value, bias, mask,
                                        implementation="cudnn", **options)


def program_key(case: SdpaCase) -> tuple[Any, ...]:
    """The compile-cache key of a case (:meth:`SdpaCase.static_key`), then the options the
    program is built with."""
    return (case.static_key(), case.is_causal, case.bias, case.mask, case.scale, case.window,
            case.q_lengths is not None, case.kv_lengths is not None)


@functools.lru_cache(maxsize=128)
def jitted_program(impl: Callable[..., Any], key: tuple[Any, ...], backend: str
                   ) -> Callable[..., Any]:
    """Jitted ``(query, key, value, bias, mask, q_lengths, kv_lengths, do) -> outputs`` for
    ``impl``, one static configuration (:func:`program_key`) and one backend (an ``--impl``
    may trace differently by its ``kernel_harness.current_backend()``: a Pallas kernel's
    ``interpret=``)."""
    (_, is_causal, bias_kind, mask_kind, scale, window, has_q_len, has_kv_len) = key

    def program(query, key_, value, bias, mask, q_lengths, kv_lengths, do):
        def attend(query, key_, value, bias):
            return impl(
                query, key_, value,
                bias if bias_kind is not None else None,
                mask if mask_kind is not None else None,
                scale=scale, is_causal=is_causal,
                query_seq_lengths=q_lengths if has_q_len else None,
                key_value_seq_lengths=kv_lengths if has_kv_len else None,
                local_window_size=window,
            )

        out, vjp = jax.vjp(attend, query, key_, value, bias)
        dq, dk, dv, dbias = vjp(do)
        return out, dq, dk, dv, dbias

    return jax.jit(program)


def traceable(impl: Callable[..., Any] | None, case: SdpaCase, backend: Backend
              ) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``impl``'s jitted program as ``f(inputs) -> out, dq, dk, dv, dbias`` (``dbias``
    zeros of shape (1, 1, 1, 1) on both sides when the case has no bias)."""
    program = jitted_program(impl or xla_sdpa, program_key(case), backend.name)

    def f(inputs: dict[str, Any]) -> dict[str, Any]:
        q = inputs["query"]
        b = q.shape[0]
        out, dq, dk, dv, dbias = program(
            q, inputs["key"], inputs["value"],
            inputs.get("bias", jnp.zeros((1, 1, 1, 1), q.dtype)),
            inputs.get("mask", np.ones((1, 1, 1, 1), bool)),
            inputs.get("q_lengths", np.zeros((b,), np.int32)),
            inputs.get("kv_lengths", np.zeros((b,), np.int32)),
            inputs["do"],
        )
        if case.bias is None:
            dbias = jnp.zeros((1, 1, 1, 1), jnp.float32)
        return {"out": out, "dq": dq, "dk": dk, "dv": dv, "dbias": dbias}

    return f


#: How the sdpa family calls its kernel.
ADAPTER = Adapter(kernel=xla_sdpa, impl_signature=IMPL_SIGNATURE, run=traced_run(traceable),
                  backends=SDPA_BACKENDS)
