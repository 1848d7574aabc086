"""What every kv-cache write family's ``Family`` record takes from the op, written once.

A family gives its case type and strategy (how its kernel is told the write), its adapter
and ``traceable``, and the labels of its own configuration; :func:`kv_write_record`
returns the op's part: the reference, the outputs (the cache's values and its bits) with
their axes and exact tolerances, the op's labels and the modes its strategy reaches, and
the metamorphic hooks a copy has. :func:`with_cache_bits` makes an adapter's ``run``
return the bits beside the cache.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.core.case import Arrays, cast
from kernel_harness.ops.kv_cache_write.cases import TOLERANCES, kv_write_events, reference
from kernel_harness.ops.kv_cache_write.reference import OUTPUT_AXES, cache_bits
from kernel_harness.records.hooks import Metamorphic

#: The op's labels (:func:`~.cases.kv_write_events`) a family's strategy must reach; the
#: dtype and ``nothing-written`` are reported, not required.
MODES: frozenset[str] = frozenset({
    "write-crosses-page", "ends-at-page-end", "starts-at-page-start", "zero-new-tokens",
    "empty-prefix", "decode-step", "fills-whole-page", "multi-seq", "pad-rows",
    "spare-pages"})

#: ``Adapter.run``: ``run(impl, case, inputs, backend) -> outputs``.
Run = Callable[[Any, Any, Arrays, Backend], Arrays]


def with_cache_bits(run: Run) -> Run:
    """``run`` (whose one output is the updated ``kv_cache``) with ``kv_cache_bits``
    added: the cache read back in the case's dtype (float32 values are exact for a
    16-bit cache), its bits by :func:`~.reference.cache_bits`."""
    def with_bits(impl: Any, case: Any, inputs: Arrays, backend: Backend) -> Arrays:
        out = run(impl, case, inputs, backend)
        out["kv_cache_bits"] = cache_bits(cast(np.asarray(out["kv_cache"]), case.dtype))
        return out

    return with_bits


def kv_write_record(*, traceable: Callable[..., Any],
                    config_events: Callable[[Any], Sequence[str]] = lambda case: (),
                    config_modes: frozenset[str] = frozenset(),
                    tpu_device_kind: str | None = None) -> dict[str, Any]:
    """``Family`` fields of a kv-cache write kernel: the op's reference, output axes and
    exact tolerances, no capabilities (no gradients: a copy), its labels (the op's, then
    ``config_events``: how the family's kernel is told the write) and modes (:data:`MODES`,
    then ``config_modes``), and the metamorphic hooks (no queries and keys: deterministic,
    finite-out with k scaled, lowers-for-tpu through ``traceable``, for the chip
    ``tpu_device_kind`` where the kernel's lowering asks it)."""
    return dict(
        reference=reference, output_axes=OUTPUT_AXES, tolerances=TOLERANCES,
        capabilities=frozenset(),
        events=lambda case: sorted({*kv_write_events(case), *config_events(case)}),
        modes=MODES | config_modes,
        metamorphic=Metamorphic(roles={}, logit_input="k", traceable=traceable,
                                tpu_device_kind=tpu_device_kind))
