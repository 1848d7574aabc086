"""``FAMILY``: the fused RMSNorm kernel as a kernel-harness family.

Declared to the harness by the ``kernel_harness.families`` entry point in this
package's pyproject.toml, or with ``--family-module rmsnorm_family.family``.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness import Backend, Family, Tolerance, ToleranceTable, standard_floor
from rmsnorm_family import cases, kernel, reference

IMPL_SIGNATURE = (
    "impl(x, w, *, eps, block_rows, interpret) -> y; x [rows, hidden], w [hidden]; "
    "differentiable in x and w (jax.vjp)"
)

_F32 = dict(max_rel_err=1e-5, reason="float32 throughout; row sums of <= 256 terms")
_BF16 = dict(
    max_rel_err=2e-2,
    reason="bfloat16 inputs and outputs (8-bit mantissa, 3.9e-3 per rounding), float32 "
    "accumulation; dw sums up to 32 bf16-rounded products",
)
TOLERANCES = ToleranceTable(
    {(d, o): Tolerance(**t, slice_floor=standard_floor(d, gradient=o != "y"))
     for d, t in (("float32", _F32), ("bfloat16", _BF16)) for o in ("y", "dx", "dw")}
)


@functools.lru_cache(maxsize=64)
def _compiled(impl: Any, eps: float, block_rows: int, interpret: Any) -> Any:
    def forward_and_vjp(x, w, dy):
        y, vjp = jax.vjp(
            lambda x, w: impl(x, w, eps=eps, block_rows=block_rows, interpret=interpret), x, w
        )
        dx, dw = vjp(dy.astype(y.dtype))
        return y, dx, dw

    return jax.jit(forward_and_vjp)


def run(impl: Any, case: cases.RmsNormCase, inputs: dict[str, np.ndarray],
        backend: Backend) -> dict[str, np.ndarray]:
    """Runs ``impl`` on ``backend``: y and the vjp gradients dx, dw (as float32 numpy)."""
    put = functools.partial(jax.device_put, device=backend.device)
    x, w, dy = (put(jnp.asarray(inputs[n])) for n in ("x", "w", "dy"))
    fn = _compiled(impl, case.eps, case.block_rows, backend.pallas_interpret())
    y, dx, dw = jax.block_until_ready(fn(x, w, dy))
    return {n: np.asarray(a, np.float32) for n, a in (("y", y), ("dx", dx), ("dw", dw))}


def events(case: cases.RmsNormCase) -> list[str]:
    """What a case reaches: several row blocks, bf16, eps-sized rows, large rows."""
    labels = [case.dtype, f"hidden:{case.hidden}"]
    if case.rows // case.block_rows > 1:
        labels.append("multi-row-block")
    if case.x_scale < 1:
        labels.append("eps-sized-rows")
    if case.x_scale > 1:
        labels.append("large-rows")
    return labels


FAMILY = Family(
    name="rmsnorm",
    summary="fused RMSNorm (Pallas forward + custom-VJP Pallas backward), an out-of-tree example",
    case_type=cases.RmsNormCase,
    cases=cases.rmsnorm_cases,
    kernel=kernel.rmsnorm,
    impl_signature=IMPL_SIGNATURE,
    run=run,
    reference=reference.reference,
    output_axes={"y": ("row", "hidden"), "dx": ("row", "hidden"), "dw": ("hidden",)},
    tolerances=TOLERANCES,
    capabilities=frozenset({"gradients"}),
    backends=frozenset({"interpret", "tpu-interpret"}),
    events=events,
    contract="y = x / sqrt(mean(x**2, -1) + eps) * w per row (eps inside the sqrt); every "
    "element of y, dx and dw is compared; rows must be a multiple of block_rows.",
)
