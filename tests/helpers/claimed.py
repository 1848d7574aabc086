"""The ``claimed-sizes`` property of gpu-softmax for an implementation, run as a test runs
it: two generated examples, no database (the wrapper and kernel-body comparisons' tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hypothesis

from kernel_harness.core.backends import resolve_backend
from kernel_harness.records import registry


def softmax_claimed_sizes(impl: Callable[..., Any]) -> Callable[[], None]:
    """gpu-softmax's ``claimed-sizes`` for ``impl`` on the interpret backend."""
    from kernel_harness.checks.claimed_sizes import claimed_sizes

    prop = claimed_sizes(registry.get_family("gpu-softmax"),
                         backend=resolve_backend("interpret"), impl=impl)
    return hypothesis.settings(max_examples=2, deadline=None, database=None,
                               phases=[hypothesis.Phase.generate])(prop)
