"""The tpu-inference-all-gather-matmul family: tpu-inference 0.32.0's collective matmul
(``collectives.all_gather_matmul``: x gathered over a ring of remote DMAs while each device
multiplies the slots it has by its columns of y) on 2..8 simulated devices, under both DMA
schedules, against the plain product."""

from __future__ import annotations

from kernel_harness.core.tolerance import ToleranceTable
from kernel_harness.families.tpu_inference.loader import INSTALL, TESTED_VERSION
from kernel_harness.families.tpu_inference.record import tpu_inference_family
from kernel_harness.families.tpu_inference_agmm import kernel as _kernel
from kernel_harness.families.tpu_inference_agmm.export import export
from kernel_harness.ops.all_gather_matmul.cases import AgmmCase, agmm_cases, agmm_events
from kernel_harness.ops.all_gather_matmul.reference import KERNEL_CORE, reference
from kernel_harness.ops.mesh import MAX_DEVICES

TOLERANCES = ToleranceTable.of_limits({
    ("float32", "out"): (2e-5, "float32 products summed over k <= 256 in a float32 "
                         "accumulator, block by block (a few 2^-24 roundings of terms of "
                         "size ~sqrt(k) per output); a kernel that rounds x or y to "
                         "bfloat16 errs ~4e-3"),
    ("bfloat16", "out"): (1e-2, "bfloat16 inputs multiplied exactly and summed in float32, "
                          "then stored in bfloat16: one 2^-9 rounding of each output"),
})

CONTRACT = f"""\
tpu-inference {TESTED_VERSION} all_gather_matmul(x, y, mesh, axis_name, bn=..., bk=...,
rhs_transpose=...); install: {INSTALL}.
- out = all_gather(x over rows) @ y, out sharded by columns: each device's n / devices
  columns are compared (the whole array).
- The blocks are the case's: the strategy draws explicit bn and bk. Without them
  (bn=0 in a case: the kernel's default) the kernel takes bn = n, the whole width, not
  n / devices, for any shape its tuned table lacks, and reads y out of bounds (an
  IndexError in the interpreter; other memory on a TPU): docs/libraries.md.
- dma_mode is the TPU interpreter's DMA schedule (on_wait: late and out of order; eager:
  in issue order); a result that depends on it is a bug. Cases use 2..8 devices (at most 4
  on jax < 0.11, whose interpreter deadlocks collectives on more).
- 1-D meshes only: the kernel names its neighbours by one mesh coordinate
  (device_id=(neighbor,)); on a 2-D mesh the TPU interpreter rejects that (an
  AssertionError, jax 0.10.2, measured), so its cases refuse a second mesh axis.
"""


def seed_cases(without: frozenset[str]) -> list[AgmmCase]:
    """Hand-made: two devices, one block; three devices with two column and two
    contraction blocks; four devices, y transposed, bfloat16."""
    return [
        AgmmCase(dtype="float32", seed=1, devices=2, m_per_device=16, k=128,
                 n_per_device=128, bn=128, bk=128),
        AgmmCase(dtype="float32", seed=2, devices=3, m_per_device=32, k=256,
                 n_per_device=256, bn=128, bk=128),
        AgmmCase(dtype="bfloat16", seed=3, devices=4, m_per_device=16, k=128,
                 n_per_device=128, bn=128, bk=128, rhs_transpose=True),
    ]


FAMILY = tpu_inference_family(
    computes=KERNEL_CORE,
    name="tpu-inference-all-gather-matmul",
    summary="all-gather matmul (a collective: x gathered over a ring while each device "
    "multiplies)",
    adapter=_kernel.ADAPTER,
    case_type=AgmmCase,
    cases=agmm_cases,
    reference=reference,
    output_axes={"out": ("row", "dim")},
    tolerances=TOLERANCES,
    events=agmm_events,
    contract=CONTRACT,
    seed_cases=seed_cases,
    export=export,
    devices=MAX_DEVICES,
    modes=frozenset({"devices=2", "forwarded-slots", "multi-n-block", "multi-k-block",
                     "rhs-transposed", "rhs-plain", "dma:on_wait", "dma:eager", "float32",
                     "bfloat16"}),
)
