"""The calibrated judge of the attention families (sdpa, flash): kept here for the
families that import it; it lives in :mod:`kernel_harness.ops.attention.tolerance`."""

from kernel_harness.ops.attention.tolerance import ATTENTION_CALIBRATED, with_calibrated

__all__ = ["ATTENTION_CALIBRATED", "with_calibrated"]
