"""The calibrated judge shared by the attention families that use it with the same bound
(sdpa, flash): see README "Calibrated bounds"."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from kernel_harness.core.tolerance import Calibrated, Tolerance, ToleranceTable

#: In the dtypes a family calibrates, the kernel's error may be at most 2x that of the same
#: plain-jnp math in the case's dtype at the default matmul precision, plus 2^-8 of the
#: (slice) scale.
ATTENTION_CALIBRATED = Calibrated(
    multiple=2.0, floor=2.0**-8,
    reason="2x: FlashAttention's tests' multiple (the kernel rounds differently, not more: "
    "pristine ratios seen up to ~1.4 (sdpa) / see README (flash)); floor 2^-8: one bfloat16 "
    "unit roundoff of the slice's scale, for slices where the yardstick happens to be exact",
)


def with_calibrated(entries: Mapping[tuple[str, str], Tolerance], dtypes: frozenset[str],
                    calibrated: Calibrated = ATTENTION_CALIBRATED) -> ToleranceTable:
    """The fixed entries, with ``calibrated`` on those whose dtype is in ``dtypes`` (their
    fixed bounds stay for the checks without the low-precision computation at hand)."""
    return ToleranceTable({
        key: dataclasses.replace(t, calibrated=calibrated) if key[0] in dtypes else t
        for key, t in entries.items()
    })
