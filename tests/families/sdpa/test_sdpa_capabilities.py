"""sdpa's finer optional features (issue 25): ``unaligned-lengths`` (an implementation that
needs q_len and kv_len multiples of 128, like tokamax's mosaic backend) and
``bias-gradient`` (bias in the forward only). Narrowed, the strategy never draws what the
implementation lacks, and such an implementation passes; unnarrowed it fails."""

from __future__ import annotations

import jax
import pytest
from hypothesis import find, given, settings

from kernel_harness import check_case, get_family, resolve_backend
from kernel_harness.records.narrow import narrow

SDPA = get_family("sdpa")
FIXED = settings(database=None, derandomize=True, max_examples=40, deadline=None)


def aligned_only(query, key, value, bias=None, mask=None, **options):
    """An implementation that, like a Mosaic kernel, refuses unaligned lengths."""
    if query.shape[1] % 128 or key.shape[1] % 128:
        raise ValueError(f"lengths must be multiples of 128, got {query.shape[1]}, "
                         f"{key.shape[1]}")
    return jax.nn.dot_product_attention(query, key, value, bias, mask, implementation="xla",
                                        **options)


def forward_only_bias(query, key, value, bias=None, mask=None, **options):
    """An implementation whose bias gets no gradient (dbias is silently 0)."""
    if bias is not None:
        bias = jax.lax.stop_gradient(bias)
    return jax.nn.dot_product_attention(query, key, value, bias, mask, implementation="xla",
                                        **options)


def _draws(fam, n: int = 40) -> list:
    out = []

    @FIXED
    @given(fam.cases())
    def collect(case):
        out.append(case)

    collect()
    return out[:n]


def test_both_features_are_listed_for_describe():
    assert {"unaligned-lengths", "bias-gradient"} <= set(SDPA.optional)


def test_narrowed_never_draws_unaligned_lengths_unnarrowed_does():
    fam = narrow(SDPA, {"unaligned-lengths"})
    cases = _draws(fam)
    assert cases and all(c.q_len % 128 == 0 and c.kv_len % 128 == 0 for c in cases)
    find(SDPA.cases(), lambda c: c.kv_len % 128 != 0, settings=FIXED)


def test_aligned_only_impl_passes_narrowed_and_fails_unnarrowed():
    backend = resolve_backend("interpret")
    fam = narrow(SDPA, {"unaligned-lengths"})
    for case in _draws(fam, 3):
        assert check_case(fam, case, backend, aligned_only).passed
    unaligned = find(SDPA.cases(), lambda c: c.kv_len % 128 != 0, settings=FIXED)
    with pytest.raises(ValueError, match="multiples of 128"):
        check_case(SDPA, unaligned, backend, aligned_only)


def test_without_bias_gradient_dbias_is_never_compared_and_bias_still_drawn():
    fam = narrow(SDPA, {"bias-gradient"})
    case = find(fam.cases(), lambda c: c.bias is not None, settings=FIXED)
    assert "dbias" in fam.not_compared(case)
    assert "dbias" not in SDPA.not_compared(case)


def test_forward_only_bias_impl_passes_narrowed_and_fails_unnarrowed():
    backend = resolve_backend("interpret")
    case = find(SDPA.cases(dtypes=("float32",)), lambda c: c.bias is not None, settings=FIXED)
    bad = check_case(SDPA, case, backend, forward_only_bias)
    assert not bad.passed and {v.stats.output for v in bad.failures} == {"dbias"}
    assert check_case(narrow(SDPA, {"bias-gradient"}), case, backend, forward_only_bias).passed
