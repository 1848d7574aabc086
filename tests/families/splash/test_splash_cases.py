"""Splash cases: the mask language, case validation, strategy validity, JSON round trips,
and the adapter's splash mask objects agreeing with the reference's own dense masks."""

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from kernel_harness import get_family
from kernel_harness.families.splash import kernel as splash_kernel
from kernel_harness.families.splash.cases import SplashCase
from kernel_harness.families.splash.strategy import splash_cases
from kernel_harness.ops.attention.masks import dense_mask, parse_mask

FAMILY = get_family("splash")
FAST = settings(max_examples=60, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])


def test_family_is_registered_with_its_pieces():
    assert FAMILY.case_type is SplashCase
    assert set(FAMILY.output_axes) == {"out", "dq", "dk", "dv", "lse", "dsinks"}
    for dtype in ("float32", "bfloat16"):
        for out in FAMILY.output_axes:
            assert FAMILY.tolerances.lookup(dtype, out).reason
    assert FAMILY.backends == {"interpret", "tpu-interpret", "tpu"}


@pytest.mark.parametrize("spec", [
    "full", "causal", "causal(offset=-3)", "local(left=None, right=4)",
    "local(left=0, right=0, offset=2)", "chunked(chunk=7)", "random(seed=1, density=0.25)",
    "boxes(seed=2, count=3)", "numpy(causal(offset=1))",
    "causal(offset=0) & local(left=64, right=0, offset=0) | numpy(chunked(chunk=3))",
])
def test_valid_mask_specs_parse(spec):
    expr = parse_mask(spec)
    assert dense_mask(expr, (8, 8)).dtype == bool


@pytest.mark.parametrize("spec, message", [
    ("sliding(window=3)", "unknown kind"),
    ("causal(1)", "keyword parameters only"),
    ("chunked()", "missing"),
    ("causal(offset=1, size=2)", "unknown"),
    ("local(left=None, right=None)", "both None"),
    ("local(left=-1, right=0)", ">= 0"),
    ("chunked(chunk=0)", ">= 1"),
    ("random(seed=1, density=0)", "density"),
    ("causal(offset=1.5)", "integers"),
    ("causal(offset=x)", "numbers or None"),
    ("causal(offset=0) +", "not a valid mask expression"),
    ("causal(offset=0) + full", "cannot read"),
    ("numpy(full, full)", "exactly one"),
])
def test_bad_mask_specs_are_clear_errors(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_mask(spec)


GOOD = dict(dtype="float32", seed=0, batch=1, q_heads=1, kv_heads=1, q_len=256, kv_len=256,
            head_dim=128)


@pytest.mark.parametrize("changes, message", [
    (dict(dtype="float16"), "splash runs"),
    (dict(q_len=200), "multiple of 128"),
    (dict(q_heads=3, kv_heads=2), "must be a multiple of kv_heads"),
    (dict(mqa=True, q_heads=2, kv_heads=2), "mqa=True"),
    (dict(head_dim=32), "head_dim"),
    (dict(masks=("full", "full")), "1 or q_heads"),
    (dict(masks=("nope",)), "unknown kind"),
    (dict(q_segments=(((0, 256),),)), "both"),
    (dict(q_segments=(((0, 200),),), kv_segments=(((0, 256),),)), "must sum to 256"),
    (dict(q_segments=(((0, 0), (1, 256)),), kv_segments=(((0, 256),),)), "length >= 1"),
    (dict(batch=2, q_segments=(((0, 256),), ((0, 128), (1, 128))),
          kv_segments=(((0, 256),),) * 2), "one segment layout for every batch row"),
    (dict(block_q=384), "block_q=384"),
    (dict(block_kv=256, block_kv_compute=192), "block_kv_compute=192"),
    (dict(fused_bwd=True), "must be None"),
    (dict(block_q_dq=None), "needs block_q_dq"),
    (dict(soft_cap=0.0), "soft_cap"),
    (dict(q_layout="row_major"), "q_layout"),
])
def test_invalid_cases_are_rejected_clearly(changes, message):
    with pytest.raises(ValueError, match=message):
        SplashCase(**{**GOOD, **changes})


def _check_drawn(case: SplashCase) -> None:
    assert SplashCase.from_json(case.to_json()) == case
    counts = case.visible().sum(axis=-1)
    if not case.sinks:
        assert not case.rows_without_keys().any(), "rows without keys are drawn only with sinks"
    assert (counts >= 2).mean() >= 0.5
    inputs = case.materialize()
    b, hq, hkv = case.batch, case.q_heads, case.kv_heads
    assert inputs["q"].shape == (b, hq, case.q_len, case.head_dim)
    assert inputs["k"].shape == (b, hkv, case.kv_len, case.head_dim)
    assert inputs["v"].shape == (b, hkv, case.kv_len, case.value_dim)
    assert inputs["do"].shape == (b, hq, case.q_len, case.value_dim)
    assert str(inputs["q"].dtype) == case.dtype
    assert ("sinks" in inputs) == case.sinks
    assert ("q_segment_ids" in inputs) == (case.q_segments is not None)
    for name, value in case.materialize().items():
        np.testing.assert_array_equal(value, inputs[name])  # deterministic
    assert all(isinstance(e, str) for e in FAMILY.events(case))


# Nightly: splash's drawn cases are checked per push by test_every_case_compares and its
# goldens.
@pytest.mark.nightly
@FAST
@given(splash_cases())
def test_drawn_cases_are_valid_round_trip_and_well_posed(case):
    _check_drawn(case)


@settings(max_examples=25, deadline=None, database=None)
@given(splash_cases(segments=True, sinks=False, heads="gqa", soft_cap=True))
def test_pinned_options_are_honoured(case):
    _check_drawn(case)
    assert case.q_segments is not None and not case.sinks and case.soft_cap is not None
    assert case.kv_heads >= 2 and case.q_heads // case.kv_heads >= 2


@FAST
@given(splash_cases())
def test_adapter_masks_agree_with_reference_masks(case):
    """The splash mask objects the adapter builds (the kernel's own mask classes), read
    densely, equal the reference's independent masks head by head."""
    kmask = splash_kernel.kernel_mask(case)
    assert kmask.shape == (case.q_heads, case.q_len, case.kv_len)
    no_segments = dataclasses.replace(case, q_segments=None, kv_segments=None)
    want = no_segments.visible()[0]
    for h in range(case.q_heads):
        got = np.asarray(kmask[h, 0:case.q_len, 0:case.kv_len], bool)
        np.testing.assert_array_equal(got, want[h], err_msg=case.head_masks()[h])


def test_strategy_reaches_the_hard_paths():
    seen: set[str] = set()

    @settings(max_examples=300, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(splash_cases())
    def collect(case):
        seen.update(FAMILY.events(case))

    collect()
    wanted = {
        "multi-q-block", "multi-kv-block", "kv-compute<kv-block", "dkv-compute<dkv-block",
        "gqa", "mqa", "mqa-kernel", "q-len<kv-len", "numpy-mask", "mask-function", "mask-blocks",
        "mask:causal", "mask:local", "mask:chunked", "mask:random", "mask:boxes",
        "mask:numpy", "mask:and", "mask:or", "mask:full", "per-head-masks", "segments",
        "length-1-segment", "unsorted-segments", "cross-segments", "window", "window-edge",
        "soft-cap", "sinks", "bfloat16", "float32", "fused-bwd", "seq-minor-layout",
        "partial-blocks", "skipped-blocks", "rows-without-keys", "head-dim-v!=head-dim", "batch>1",
    }
    assert wanted <= seen, sorted(wanted - seen)


def test_gqa_as_mha_of_an_mqa_case_runs_the_mha_kernel():
    case = SplashCase(**{**GOOD, "q_heads": 4, "kv_heads": 1, "mqa": True})
    mha, inputs = FAMILY.metamorphic.as_mha(case, case.materialize())
    assert (mha.kv_heads, mha.mqa) == (4, False) and inputs["k"].shape[1] == 4
