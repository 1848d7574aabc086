"""Planted wrong kernels for ``kernel-harness bench``: each must be reported FAIL by the
correctness pre-check and never timed."""

from __future__ import annotations

from kernel_harness.families.sdpa.kernel import xla_sdpa


def sdpa_ignores_causal(query, key, value, bias=None, mask=None, **opts):
    """Attends to every key: the benchmark case is causal, so the output is wrong."""
    return xla_sdpa(query, key, value, bias, mask, **{**opts, "is_causal": False})


def sdpa_crashes(query, key, value, bias=None, mask=None, **opts):
    """Raises: a crash in the pre-check is a FAIL too."""
    raise RuntimeError("planted crash")
