"""Adapter running flywheel-tpu's fused conv1d + Gated DeltaNet serving kernel
(``flywheel_tpu.linear_attention.fused_conv1d_gdn``): one ragged batch (decodes first, then
prefill and continued sequences), the conv and recurrent states read from and written to
slot pools; called as :mod:`kernel_harness.families.flywheel_tpu.linear_attention` says
(TPU interpret mode off a TPU, an abstract v6e answering the chip's questions)."""

from __future__ import annotations

from typing import Any

from kernel_harness.families.flywheel_tpu import library
from kernel_harness.families.flywheel_tpu import linear_attention as fused

MODULE = "flywheel_tpu.linear_attention.gdn.wrapper"

IMPL_SIGNATURE = fused.signature("fused_conv1d_gdn", "a") + (
    "; a float32 [tokens, n_v] (the decay gate's input), dt_bias [n_v]")

# Imported with the family (so ``kernel-harness mutate`` binds a mutated copy) where
# flywheel-tpu can be; None where not.
_LOADED = library.load(MODULE)


def fused_conv1d_gdn(*args: Any, **options: Any) -> Any:
    """The default implementation: flywheel-tpu's ``fused_conv1d_gdn`` (looked up at call
    time, so a mutated copy is the one called)."""
    return library.required(_LOADED, MODULE).fused_conv1d_gdn(*args, **options)


#: The kernel as one jitted program: out, conv_state, recurrent_state (untouched_bits).
PROGRAM = fused.program("flywheel-tpu-gdn", fused_conv1d_gdn)
traceable = PROGRAM.traceable

#: How the family calls its kernel.
ADAPTER = fused.adapter(PROGRAM, IMPL_SIGNATURE)
