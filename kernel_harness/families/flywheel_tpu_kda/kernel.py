"""Adapter running flywheel-tpu's fused conv1d + KDA (Kimi Delta Attention) serving kernel
(``flywheel_tpu.linear_attention.fused_conv1d_kda``): flywheel-tpu-gdn's call
(:mod:`kernel_harness.families.flywheel_tpu.linear_attention`) with the decay gate per key
channel (``g`` [tokens, n_v d_k] bfloat16, dt_bias [n_v d_k]), the library's default log
decay (-exp(a_log) softplus(g + dt_bias), no ``lower_bound``) and beta = sigmoid(b)."""

from __future__ import annotations

from typing import Any

from kernel_harness.families.flywheel_tpu import library
from kernel_harness.families.flywheel_tpu import linear_attention as fused

MODULE = "flywheel_tpu.linear_attention.kda.wrapper"

IMPL_SIGNATURE = fused.signature("fused_conv1d_kda", "g") + (
    "; g bfloat16 [tokens, n_v d_k] (the decay gate's input per key channel, head-major), "
    "dt_bias [n_v d_k]")

# Imported with the family (so ``kernel-harness mutate`` binds a mutated copy) where
# flywheel-tpu can be; None where not.
_LOADED = library.load(MODULE)


def fused_conv1d_kda(*args: Any, **options: Any) -> Any:
    """The default implementation: flywheel-tpu's ``fused_conv1d_kda`` (looked up at call
    time, so a mutated copy is the one called)."""
    return library.required(_LOADED, MODULE).fused_conv1d_kda(*args, **options)


#: The kernel as one jitted program: out, conv_state, recurrent_state (untouched_bits).
PROGRAM = fused.program("flywheel-tpu-kda", fused_conv1d_kda)
traceable = PROGRAM.traceable

#: How the family calls its kernel.
ADAPTER = fused.adapter(PROGRAM, IMPL_SIGNATURE)
