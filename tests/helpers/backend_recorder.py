"""sdpa as an ``--impl`` that records the backend it was traced for
(tests/core/test_current_backend.py reads it back)."""

from __future__ import annotations

import kernel_harness
from kernel_harness.families.sdpa.kernel import xla_sdpa

SEEN: list[str] = []


def asks_its_backend(query, key, value, bias=None, mask=None, **options):
    """sdpa as an ``--impl`` that records the backend it was traced for."""
    SEEN.append(kernel_harness.current_backend().name)
    return xla_sdpa(query, key, value, bias, mask, **options)
