"""``kernel-harness describe`` names a family's default kernel the same way in every process
(a description is compared before and after a change: no memory address may leak in)."""

from __future__ import annotations

import functools

from kernel_harness.cli.describe import callable_name, describe
from kernel_harness.records.registry import get_family


def _kernel(q, k, *, is_mqa):
    return q


def test_a_partial_is_named_by_its_function_and_bound_arguments():
    name = callable_name(functools.partial(_kernel, 1, is_mqa=False))
    assert name == f"{__name__}:_kernel(1, is_mqa=False, ...)"
    assert "0x" not in name
    assert callable_name(_kernel) == f"{__name__}:_kernel"


def test_the_splash_description_has_no_memory_address():
    text = describe(get_family("splash"), samples=1)
    default = next(line for line in text.splitlines() if line.startswith("  default: "))
    assert "_make_splash_attention(is_mqa=False, ...)" in default
    assert " at 0x" not in text


def test_the_description_says_what_may_run_outside_the_kernels_and_the_claimed_sizes():
    softmax = describe(get_family("gpu-softmax"), samples=1)
    assert "claimed sizes (traced, not run; softmax rows are vocabularies" in softmax
    assert "  x (8, 262144) bfloat16" in softmax
    assert "  nothing beyond layout" in softmax
    splash = describe(get_family("splash"), samples=1)
    assert "claimed sizes: none declared (claimed-sizes is a SKIP)" in splash
    assert "backward: reduce_sum (" in splash
