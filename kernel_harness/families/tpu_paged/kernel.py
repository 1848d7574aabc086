"""Adapter running the TPU ``paged_attention`` on a backend (forward only: no VJP).

The kernel has no ``interpret`` argument: on ``interpret``/``tpu-interpret`` the jitted
call is traced and run under forced TPU interpret mode (:meth:`Backend.forcing_interpret`);
``tpu`` compiles it. Megacore modes split the grid over two TensorCores and, by the
kernel's own docstring, hang on a chip with one ("set this only if megacore is enabled,
otherwise the kernel may hang"): the ``interpret`` backend simulates one core, so a
megacore case runs there under the same plain settings with two simulated cores (said in
the contract; ``tpu-interpret`` simulates two anyway).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np
from jax.experimental.pallas.ops.tpu import paged_attention as _pa
from jax.experimental.pallas.ops.tpu.paged_attention import quantization_utils as _qu

from kernel_harness.core import compat
from kernel_harness.core.backends import Backend
from kernel_harness.families.tpu_paged.cases import TpuPagedCase
from kernel_harness.records.adapter import TPU_BACKENDS, Adapter, traced_run

#: The default implementation: ``jax.experimental.pallas.ops.tpu.paged_attention``.
paged_attention = _pa.paged_attention

IMPL_SIGNATURE = (
    "paged_attention(q, k_pages, v_pages, lengths, page_indices, *, attn_logits_soft_cap, "
    "pages_per_compute_block, megacore_mode, inline_seq_dim) -> out; q: [batch, q_heads, "
    "head_dim] (logits are q.k, unscaled), k/v_pages: [kv_heads, total_pages, page_size, "
    "head_dim] or quantization_utils.QuantizedTensor(weight=int8 pages, scales=float32 "
    "[kv_heads, total_pages, page_size, 1]), lengths: int32 [batch], page_indices: int32 "
    "[batch, pages_per_seq]; out: [batch, q_heads, head_dim] in q's dtype"
)

TPU_PAGED_BACKENDS = TPU_BACKENDS


@functools.lru_cache(maxsize=64)
def _program(impl: Callable[..., Any], key: tuple[Any, ...]) -> Callable[..., Any]:
    """Jitted ``(q, k, v, k_scales, v_scales, lengths, page_indices) -> {"out"}``."""
    f = dict(key)
    kwargs = dict(attn_logits_soft_cap=f["soft_cap"],
                  pages_per_compute_block=f["pages_per_compute_block"],
                  megacore_mode=f["megacore_mode"], inline_seq_dim=f["inline_seq_dim"])

    def program(q, k, v, k_scales, v_scales, lengths, page_indices):
        if f["quantized"]:
            k = _qu.QuantizedTensor(weight=k, scales=k_scales)
            v = _qu.QuantizedTensor(weight=v, scales=v_scales)
        return {"out": impl(q, k, v, lengths, page_indices, **kwargs)}

    return jax.jit(program)


@contextlib.contextmanager
def _interpreting(case: TpuPagedCase, backend: Backend) -> Iterator[None]:
    if backend.name == "interpret" and case.megacore_mode is not None:
        params = compat.tpu_interpret_params(
            detect_races=False, uninitialized_memory="zero", num_cores_or_threads=2)
        with compat.forced_tpu_interpret_mode(params):
            yield
    else:
        with backend.forcing_interpret():
            yield


def traceable(impl: Callable[..., Any] | None, case: TpuPagedCase, backend: Backend
              ) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``impl``'s jitted program as ``f(inputs) -> {"out"}`` (its adapter runs it inside
    :func:`_interpreting`)."""
    program = _program(impl or paged_attention, case.static_key())
    none = np.zeros((1,), np.float32)

    def f(inputs: dict[str, Any]) -> dict[str, Any]:
        return program(inputs["q"], inputs["k_pages"], inputs["v_pages"],
                       inputs.get("k_scales", none), inputs.get("v_scales", none),
                       inputs["lengths"], inputs["page_indices"])

    return f


#: How the tpu-paged family calls its kernel.
ADAPTER = Adapter(kernel=paged_attention, impl_signature=IMPL_SIGNATURE,
                  run=traced_run(traceable, context=_interpreting), backends=TPU_PAGED_BACKENDS)
