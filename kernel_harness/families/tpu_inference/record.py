"""The ``Family`` record every tpu-inference kernel shares: the release tested in the
summary, what to install, one Pallas kernel per forward call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernel_harness.families.tpu_inference.loader import INSTALL, TESTED_VERSION
from kernel_harness.records.adapter import Adapter
from kernel_harness.records.family import Family
from kernel_harness.records.kernels import KernelExpectation

#: What a family needs installed, as ``Family.requires`` says it.
REQUIRES = f"tpu-inference: {INSTALL}"


def tpu_inference_family(*, summary: str, adapter: Adapter, needs: str = "tpu-inference",
                         requires: str = REQUIRES, capabilities: frozenset[str] = frozenset(),
                         computes: Mapping[str, str] | None = None, **fields: Any) -> Family:
    """The record of a tpu-inference kernel: ``summary`` after the release tested, then
    ``needs`` (``list`` shows what is missing), what to install, the adapter's fields and
    one Pallas kernel per forward call (computing ``computes``, the op's core:
    ``KernelExpectation.forward_computes``); ``fields`` are the family's own."""
    return Family(summary=f"tpu-inference {TESTED_VERSION} {summary}; needs {needs}",
                  **adapter.fields(),
                  kernels=KernelExpectation(forward=1, forward_computes=computes or {}),
                  requires=requires, capabilities=capabilities, **fields)
