"""The attention op's judges: the fixed float32/bfloat16 tables with their measured
reasons, and the calibrated bound of the low-precision dtypes (README "Calibrated bounds").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from kernel_harness.core.tolerance import Calibrated, Tolerance, ToleranceTable, standard_floor

#: In the dtypes a family calibrates, the kernel's error may be at most 2x that of the same
#: plain-jnp math in the case's dtype at the default matmul precision, plus 2^-8 of the
#: (slice) scale.
ATTENTION_CALIBRATED = Calibrated(
    multiple=2.0, floor=2.0**-8,
    reason="2x: FlashAttention's tests' multiple (the kernel rounds differently, not more: "
    "pristine ratios seen up to ~1.4 (sdpa) / see README (flash)); floor 2^-8: one bfloat16 "
    "unit roundoff of the slice's scale, for slices where the yardstick happens to be exact",
)

_F32 = ("float32 {where}; worst observed {obs} over ~80 calibration cases; the limit stays "
        "~10x below the 2e-3 of a bf16 PV product")
_BF16 = "bf16 {where}; worst observed {obs} over ~80 calibration cases, limit ~3-4x that"

#: ``{output: ((float32 limit, float32 worst seen), (bfloat16 limit, bfloat16 worst seen))}``
Measured = Mapping[str, tuple[tuple[float, str], tuple[float, str]]]


def with_calibrated(entries: Mapping[tuple[str, str], Tolerance], dtypes: frozenset[str],
                    calibrated: Calibrated = ATTENTION_CALIBRATED) -> ToleranceTable:
    """The fixed entries, with ``calibrated`` on those whose dtype is in ``dtypes`` (their
    fixed bounds stay for the checks without the low-precision computation at hand)."""
    return ToleranceTable({
        key: dataclasses.replace(t, calibrated=calibrated) if key[0] in dtypes else t
        for key, t in entries.items()
    })


def measured_table(measured: Measured, *, f32_where: str, bf16_where: str,
                   calibrated_dtypes: frozenset[str], forward: frozenset[str]) -> ToleranceTable:
    """The fixed float32 and bfloat16 limits, each with the worst error seen over the
    calibration cases as its reason (``f32_where``/``bf16_where``: where the kernel computes
    in that dtype), and the calibrated bound on ``calibrated_dtypes``. The ``forward``
    outputs are judged by their own size (:func:`standard_floor` of a result); every other
    one is a gradient whose rows sum rounded products (the gradient floors)."""
    unknown = forward - set(measured)
    if unknown:
        raise ValueError(f"forward outputs {sorted(unknown)} have no measured limits")
    entries: dict[tuple[str, str], Tolerance] = {}
    for out, ((f32, f32_obs), (bf16, bf16_obs)) in measured.items():
        gradient = out not in forward
        entries[("float32", out)] = Tolerance(
            max_rel_err=f32, reason=_F32.format(where=f32_where, obs=f32_obs),
            slice_floor=standard_floor("float32", gradient=gradient))
        entries[("bfloat16", out)] = Tolerance(
            max_rel_err=bf16, reason=_BF16.format(where=bf16_where, obs=bf16_obs),
            slice_floor=standard_floor("bfloat16", gradient=gradient))
    return with_calibrated(entries, calibrated_dtypes)
