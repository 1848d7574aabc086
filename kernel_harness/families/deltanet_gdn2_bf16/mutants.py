"""Mutant catalog for deltanet-tpu-gdn2-bf16: the fp32 family's planted bugs
(:mod:`kernel_harness.families.deltanet_gdn2.mutants`) but the one that moves the state
matmuls to bfloat16, which in precision="bf16" they already are (no change to see)."""

from __future__ import annotations

from kernel_harness.families.deltanet_gdn2.mutants import MUTANTS as _FP32
from kernel_harness.records.mutant import Mutant

MUTANTS: list[Mutant] = [m for m in _FP32 if m.name != "state-matmuls-in-bf16"]
