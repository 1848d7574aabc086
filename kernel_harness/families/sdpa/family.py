"""The ``sdpa`` family: ``jax.nn.dot_product_attention`` with ``implementation="xla"``."""

from __future__ import annotations

from kernel_harness.families.sdpa import kernel as _kernel
from kernel_harness.families.sdpa.bench import BENCH
from kernel_harness.families.sdpa.cases import SdpaCase
from kernel_harness.families.sdpa.export import export
from kernel_harness.ops.attention.record import problem_record
from kernel_harness.ops.attention.tolerance import measured_table
from kernel_harness.records.family import Family
from kernel_harness.records.outside import OutsideKernel

CONTRACT = """\
jax.nn.dot_product_attention(implementation="xla"), forward and vjp (incl. the bias gradient).
- No Pallas kernel: backend "interpret" is plain XLA on the CPU; "tpu"/"gpu" are XLA there.
- logits = scale * q.k^T + bias (bias after scaling); scale defaults to 1/sqrt(head_dim).
- Causal and local windows are top-left aligned on absolute positions: query i sees key j
  iff j <= i (causal) and i - left <= j <= i + right (local_window_size=(left, right)),
  whatever q_len and kv_len are.
- key_value_seq_lengths masks keys j >= length; query_seq_lengths makes rows i >= length
  exactly zero (output and gradients): padding rows are inside the contract.
- Masking REPLACES logits with -0.7*float32.max. A row that sees no key and is not a
  padding row returns the mean of v over ALL kv_len keys (padding keys included): outside
  the contract, excluded from out/dq; the case's cotangent is zero there so it cannot leak
  into dk/dv.
- bfloat16: probabilities are cast to bfloat16 before the PV product (by design).
- Judges: float32 by the fixed table; bfloat16 by the calibrated bound (error at most 2x
  that of the same plain-jnp math in bfloat16 at the backend's default matmul precision,
  + 2^-8, globally and per slice; README "Calibrated bounds"), so bfloat16 draws 4x/16x
  logits too.
- dq, dk and dbias are judged against the size of the terms summed into them
  (dS = P (dP - D) cancels: at 16x logits a float32 row's dq is ~1e-5 of its terms, and
  XLA's rounding of those terms is not the reference's).
- float32 tolerances assume full-precision float32 matmuls (the CPU). On TPU (and GPUs
  with TF32) XLA's default precision is lower, so float32 cases are expected to fail there
  unless run with jax_default_matmul_precision="highest"; that is the op's behaviour,
  not a harness fault.
"""


TOLERANCES = measured_table(
    {
        "out": ((1e-4, "1.3e-7"), (1.5e-2, "4.9e-3")),
        # dq, dk, dbias: of the size of the terms summed into them (record.definition),
        # re-measured over 200 draws of every logit scale on 2026-12-04.
        "dq": ((2e-4, "3.4e-7"), (2e-2, "3.8e-3")),
        "dk": ((2e-4, "2.8e-7"), (2e-2, "4.5e-3")),
        "dv": ((1e-4, "1.7e-7"), (1.5e-2, "4.5e-3")),
        "dbias": ((2e-4, "2.5e-7"), (2e-2, "4.2e-3")),
    },
    f32_where="at full precision (XLA on CPU)",
    bf16_where="inputs, probabilities cast to bf16 before the PV product",
    calibrated_dtypes=SdpaCase.FEATURES.calibrated,
    forward=frozenset({"out"}),
)

#: The kernel's modes ci-sized draws must reach (Family.modes).
MODES = frozenset({
    "causal", "gqa", "mqa", "bias-full", "mask-full", "explicit-scale", "window", "kv-lengths",
    "q-lengths", "padding-rows", "rows-without-keys", "q-len<kv-len", "q-len>kv-len",
    "float32", "bfloat16",
})


FAMILY = Family(
    modes=MODES,
    name="sdpa",
    summary="jax.nn.dot_product_attention, implementation='xla' (no Pallas kernel; "
    "'interpret' = plain XLA on the CPU), forward and vjp incl. the bias gradient",
    **problem_record(SdpaCase, traceable=_kernel.traceable, shardable=True),
    **_kernel.ADAPTER.fields(),
    tolerances=TOLERANCES,
    capabilities=frozenset({
        "causal", "full", "local-window", "numpy-mask", "gqa", "mqa", "bias", "sm-scale",
        "q-len-ne-kv-len", "ragged-lengths", "gradients",
    }),
    contract=CONTRACT,
    bench=BENCH,
    export=export,
    outside_kernel=OutsideKernel(by_design=(
        "jax.nn.dot_product_attention's XLA implementation: the whole op is XLA, no Pallas "
        "kernel by design")),
)
