"""The hstu family adapter: runs any implementation with ``hstu_attention``'s
signature on a backend and returns ``out`` and its vjp gradients."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.kernels.hstu.api import hstu_attention
from kernel_harness.ops.pointwise_attention.cases import BLOCK_FIELDS
from kernel_harness.records.adapter import TPU_BACKENDS, Adapter

IMPL_SIGNATURE = (
    "impl(mask_type, q, k, v, *, q_segment_ids=None, kv_segment_ids=None, "
    "sliding_window_size=None, scale=None, block_q=None, block_kv=None, "
    "block_kv_compute=None, block_q_dkv=None, block_kv_dkv=None, "
    "block_kv_dkv_compute=None, interpret=False) -> out; q/k/v [batch, length, heads, "
    "head_dim], mask_type 'causal' | 'full' | numpy bool [q_len, kv_len]; gradients via jax.vjp"
)

def run(impl: Any, case: Any, inputs: dict[str, np.ndarray], backend: Backend) -> dict:
    """Calls ``impl`` on ``backend`` and returns ``out`` and its vjp ``dq``, ``dk``, ``dv``."""
    device = backend.device

    def put(name: str) -> jax.Array | None:
        x = inputs.get(name)
        return None if x is None else jax.device_put(jnp.asarray(x), device)

    q, k, v, do = put("q"), put("k"), put("v"), put("do")
    mask_type = inputs["mask"] if case.mask == "numpy" else case.mask
    kwargs = {name: getattr(case, name) for name in BLOCK_FIELDS}
    kwargs.update(
        q_segment_ids=put("q_segment_ids"), kv_segment_ids=put("kv_segment_ids"),
        sliding_window_size=case.window, scale=case.scale,
        interpret=backend.pallas_interpret(),
    )
    # Races and uninitialized reads under tpu-interpret are the runner's business
    # (kernel_harness.run.diagnostics); this adapter only runs the implementation.
    out, vjp = jax.vjp(lambda q, k, v: impl(mask_type, q, k, v, **kwargs), q, k, v)
    dq, dk, dv = vjp(do if do.dtype == out.dtype else do.astype(out.dtype))
    result = {"out": out, "dq": dq, "dk": dk, "dv": dv}
    return {name: np.asarray(jax.block_until_ready(x)) for name, x in result.items()}


#: How the hstu family calls its kernel.
ADAPTER = Adapter(kernel=hstu_attention, impl_signature=IMPL_SIGNATURE, run=run,
                   backends=TPU_BACKENDS)
