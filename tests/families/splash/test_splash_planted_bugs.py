"""Planted bugs around the real splash kernel: each wrapper (or patched copy of the kernel
source) must make the splash family check fail within a few derandomized examples.

Wrappers have the family's impl signature (a ``make_splash_mha``-like factory). The
patched copy is loaded as its own module and passed as ``copy.make_splash_mha``, the way
``--impl my_copy:make_splash_mha`` runs an edited kernel; nothing of the kernel is stored
here, the installed source is edited at test time.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as _sk
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib

from kernel_harness import check_case, get_family, resolve_backend
from kernel_harness.families.splash.strategy import splash_cases
from kernel_harness.records.mutant import load_patched
from kernel_harness.regression.mutate import load_catalog

FAMILY = get_family("splash")
BACKEND = resolve_backend("interpret")
F32 = ("float32",)


def first_failure(impl, strategy, max_examples):
    """Runs the family check on up to ``max_examples`` derandomized cases (no shrinking);
    returns the first failing result, or None."""
    results = []

    @settings(max_examples=max_examples, derandomize=True, deadline=None, database=None,
              phases=(Phase.explicit, Phase.generate),
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def prop(case):
        result = check_case(FAMILY, case, BACKEND, impl)
        results.append(result)
        assert result.passed

    try:
        prop()
    except AssertionError:
        pass
    failing = [r for r in results if not r.passed]
    return failing[0] if failing else None


def failed_outputs(result) -> set[str]:
    return {v.stats.output for v in result.failures}


# ------------------------------------------------------------------ wrappers


def _with_backward(backward):
    """A factory whose kernel runs splash forward but ``backward(good, segs, res, g)``
    for the vjp (``good`` is the real per-example kernel)."""

    def factory(mask, **kw):
        good = _sk.make_splash_mha(mask, **kw)
        if kw["save_residuals"]:
            return good

        def kernel(q, k, v, segment_ids=None, sinks=None):
            # The segment ids pass through as an argument (no cotangent): a backward that
            # closed over them could not run outside the trace the harness counted.
            @jax.custom_vjp
            def f(q, k, v, sinks, segs):
                return good(q, k, v, segs, sinks)

            def f_fwd(q, k, v, sinks, segs):
                return f(q, k, v, sinks, segs), (q, k, v, sinks, segs)

            def f_bwd(res, g):
                *res, segs = res
                return (*backward(good, segs, tuple(res), g), None)

            f.defvjp(f_fwd, f_bwd)
            return f(q, k, v, sinks, segment_ids)

        return kernel

    return factory


def _bwd_without_segments(good, segs, res, g):
    q, k, v, sinks = res
    _, vjp = jax.vjp(lambda q, k, v, s: good(q, k, v, None, s), q, k, v, sinks)
    return vjp(g)


def _bwd_scaling_dq(good, segs, res, g):
    q, k, v, sinks = res
    _, vjp = jax.vjp(lambda q, k, v, s: good(q, k, v, segs, s), q, k, v, sinks)
    dq, dk, dv, ds = vjp(g)
    return dq * 1.01, dk, dv, ds


def _bwd_without_dsinks(good, segs, res, g):
    q, k, v, sinks = res
    _, vjp = jax.vjp(lambda q, k, v, s: good(q, k, v, segs, s), q, k, v, sinks)
    dq, dk, dv, ds = vjp(g)
    return dq, dk, dv, None if ds is None else jnp.zeros_like(ds)


segments_dropped_in_backward = _with_backward(_bwd_without_segments)
dq_scaled = _with_backward(_bwd_scaling_dq)
dsinks_dropped = _with_backward(_bwd_without_dsinks)


def soft_cap_doubled(mask, *, attn_logits_soft_cap, **kw):
    """Passes twice the case's soft cap to the kernel."""
    cap = None if attn_logits_soft_cap is None else 2 * attn_logits_soft_cap
    return _sk.make_splash_mha(mask, attn_logits_soft_cap=cap, **kw)


def _rewrite(mask, leaf):
    if isinstance(mask, mask_lib.MultiHeadMask):
        return mask_lib.MultiHeadMask(tuple(_rewrite(m, leaf) for m in mask.masks))
    if isinstance(mask, mask_lib.LogicalAnd | mask_lib.LogicalOr):
        return type(mask)(_rewrite(mask.left, leaf), _rewrite(mask.right, leaf))
    return leaf(mask)


def _window_left_plus_one(m):
    if isinstance(m, mask_lib.LocalMask):
        left, right = m.window_size
        return mask_lib.LocalMask(m.shape, (None if left is None else left + 1, right), m.offset)
    return m


def _causal_offset_dropped(m):
    if isinstance(m, mask_lib.CausalMask):
        return mask_lib.CausalMask(m.shape, offset=0)
    return m


def window_off_by_one(mask, **kw):
    """Hands the kernel a local window one key wider on the left than the case's."""
    return _sk.make_splash_mha(_rewrite(mask, _window_left_plus_one), **kw)


def causal_offset_dropped(mask, **kw):
    """Hands the kernel causal masks without their offset."""
    return _sk.make_splash_mha(_rewrite(mask, _causal_offset_dropped), **kw)


def gqa_heads_interleaved(mask, *, is_mqa, **kw):
    """Runs grouped attention as MHA with kv heads tiled (h % kv_heads), not repeated."""
    good = _sk.make_splash_mha(mask, is_mqa=is_mqa, **kw)

    def kernel(q, k, v, segment_ids=None, sinks=None):
        if not is_mqa and k.shape[0] < q.shape[0]:
            reps = (q.shape[0] // k.shape[0], 1, 1)
            k, v = jnp.tile(k, reps), jnp.tile(v, reps)
        return good(q, k, v, segment_ids, sinks)

    return kernel


def lse_shifted(mask, **kw):
    """Returns the save_residuals logsumexp off by 0.01."""
    good = _sk.make_splash_mha(mask, **kw)
    if not kw["save_residuals"]:
        return good

    def kernel(*args):
        out, (lse,) = good(*args)
        return out, (lse + 1e-2,)

    return kernel


# ------------------------------------------------------------------ tests

CASES = [
    pytest.param(segments_dropped_in_backward, dict(segments=True, dtypes=F32), 4,
                 {"dq", "dk", "dv", "dsinks"}, id="segments-dropped-in-backward"),
    pytest.param(dq_scaled, dict(dtypes=F32), 3, {"dq"}, id="dq-scaled-1.01"),
    pytest.param(dsinks_dropped, dict(sinks=True), 3, {"dsinks"}, id="dsinks-dropped"),
    pytest.param(soft_cap_doubled, dict(soft_cap=True, dtypes=F32), 4, None,
                 id="soft-cap-doubled"),
    pytest.param(window_off_by_one, dict(mask_kinds=("local",), sinks=False, dtypes=F32), 8,
                 None, id="window-left-off-by-one"),
    pytest.param(causal_offset_dropped, dict(mask_kinds=("causal",), dtypes=F32), 8, None,
                 id="causal-offset-dropped"),
    pytest.param(gqa_heads_interleaved, dict(heads="gqa"), 4, None, id="gqa-heads-interleaved"),
    pytest.param(lse_shifted, dict(dtypes=F32), 3, {"lse"}, id="lse-shifted"),
]


@pytest.mark.nightly  # splash per push: its goldens and its ci mutants (test_mutate)
@pytest.mark.parametrize("impl, options, max_examples, expected", CASES)
def test_wrapper_bug_is_caught(impl, options, max_examples, expected):
    failure = first_failure(impl, splash_cases(**options), max_examples)
    assert failure is not None, f"{impl.__name__} survived {max_examples} examples"
    if expected is not None:
        assert failed_outputs(failure) <= expected, failed_outputs(failure)


@pytest.mark.nightly
def test_pv_product_in_bf16_is_caught_through_a_patched_module():
    (pv_in_bf16,) = [m for m in load_catalog("splash") if m.name == "fwd-pv-in-bf16"]
    copy = load_patched(pv_in_bf16)  # the catalog entry `kernel-harness mutate` runs
    failure = first_failure(copy.make_splash_mha, splash_cases(dtypes=F32), 3)
    assert failure is not None
    assert "out" in failed_outputs(failure)
    worst = {v.stats.output: v.stats.max_rel_err for v in failure.verdicts}
    assert 5e-4 < worst["out"] < 5e-2  # a precision bug, not a wrong formula


@pytest.mark.nightly
def test_correct_kernel_passes_the_same_targeted_cases():
    """Control: the unmodified kernel passes the first examples of two targeted strategies."""
    for options in (dict(segments=True, sinks=True, dtypes=F32), dict(heads="gqa")):
        assert first_failure(None, splash_cases(**options), 2) is None


def test_fully_masked_rows_without_sinks_are_excluded_not_hidden():
    """A hand-written case with a row that sees nothing (causal offset -1: query 0) and no
    sinks: that row is excluded from out/lse/dq, its cotangent is zero, everything else is
    compared and passes."""
    from kernel_harness.families.splash.cases import SplashCase

    case = SplashCase(dtype="float32", seed=5, batch=1, q_heads=1, kv_heads=1, q_len=256,
                      kv_len=256, head_dim=128, masks=("causal(offset=-1)",), block_q=128,
                      block_kv=128)
    assert case.materialize()["do"][0, 0, 0].tolist() == [0.0] * 128
    result = check_case(FAMILY, case, BACKEND)
    assert result.passed, [v.problems for v in result.failures]
    assert result.excluded == {"out": 128, "dq": 128, "lse": 1}
    sinks = check_case(FAMILY, dataclasses.replace(case, sinks=True), BACKEND)
    assert sinks.passed and not sinks.excluded  # with sinks the row is defined: out 0
    # A whole query block that sees nothing (splash returns NaN there): still excluded.
    empty_block = dataclasses.replace(case, masks=("causal(offset=-128)",))
    result = check_case(FAMILY, empty_block, BACKEND)
    assert result.passed, [v.problems for v in result.failures]
    assert result.excluded == {"out": 128 * 128, "dq": 128 * 128, "lse": 128}
