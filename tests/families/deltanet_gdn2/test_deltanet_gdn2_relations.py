"""The delta-rule op's ``linear-in-v`` relation has teeth on deltanet-tpu-gdn2: the pristine
kernel passes it, and a planted kernel whose error depends on v's scale, too small for
matches-reference to see, fails it, naming the relation. (Python >= 3.12 only: the
library's own requirement; the relation against the op's reference: tests/ops/
test_delta_rule_relations.py.)"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import pytest

from kernel_harness.core.backends import resolve_backend
from kernel_harness.families.deltanet_gdn2 import kernel as _kernel
from kernel_harness.ops.delta_rule.cases import DeltaRuleCase
from kernel_harness.records.registry import get_family
from kernel_harness.run.runner import check_case
from tests.families.paged_decode.helpers import fails, passes
from tests.helpers.libraries import deltanet_installed_or_skip

NAME = "deltanet-tpu-gdn2"
RELATION = "linear-in-v"

#: Added to v's RMS by the planted guard: the outputs err by ~EPS / rms(v) ~ 5e-6 relative
#: (v ~ N(0, 1)), a quarter of the family's 2e-5 float32 limit.
EPS = 5e-6

#: One row, one partial chunk, an initial state (scaled with v by the relation).
CASE = DeltaRuleCase(dtype="float32", seed=5, batch=1, seq_len=96, initial_state=True)


def rms_guard(eps: float) -> Callable[..., tuple[jax.Array, jax.Array]]:
    """The library's kernel on v (and h0) divided by rms(v) + ``eps``, a stability guard,
    with the outputs multiplied back by rms(v) alone: every output off by the factor
    rms / (rms + eps). With eps = 0 the guard is exact under a power-of-two scaling (the
    relation holds bitwise); with eps > 0 the factor depends on v's scale, and v times c
    moves every output by ~eps (1 - 1/c) / rms relative, a few tens of float32 ulps."""
    def guarded(q, k, v, g, b, w, h0, *, segment_ids, chunk_size, qk_l2norm):
        rms = jnp.sqrt(jnp.mean(jnp.square(v)))
        guard = rms + eps
        out, final = _kernel.chunk_gdn2(q, k, v / guard, g, b, w,
                                        None if h0 is None else h0 / guard,
                                        segment_ids=segment_ids, chunk_size=chunk_size,
                                        qk_l2norm=qk_l2norm)
        return out * rms, final * rms

    return guarded


#: The planted bug (``--impl tests.families.deltanet_gdn2.test_deltanet_gdn2_relations:
#: rms_guard_epsilon_kept``).
rms_guard_epsilon_kept = rms_guard(EPS)
#: The same guard without its epsilon: linear in (v, h0), bitwise.
rms_guard_exact = rms_guard(0.0)


@pytest.mark.nightly  # ~15 s: six kernel runs and their vjps in interpret mode
def test_linear_in_v_passes_the_pristine_kernel_and_fails_a_scale_dependent_guard():
    """The planted guard matches the reference within the tolerance (matches-reference
    cannot tell it from the library's kernel); linear-in-v fails it, naming itself, and
    passes the same guard without its epsilon (the wrapper's own roundings are exact)."""
    deltanet_installed_or_skip()
    passes(NAME, RELATION, [CASE], max_examples=1)
    passes(NAME, RELATION, [CASE], max_examples=1, impl=rms_guard_exact)
    result = check_case(get_family(NAME), CASE, resolve_backend("interpret"),
                        rms_guard_epsilon_kept)
    assert result.passed, [v.problems for v in result.verdicts]
    report = fails(NAME, RELATION, [CASE], rms_guard_epsilon_kept, max_examples=1)
    assert "bitwise" in report
