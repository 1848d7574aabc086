"""Declared capabilities (narrowing a family's strategy) and tolerance overrides."""

import pytest
from hypothesis import HealthCheck, find, given, settings

from kernel_harness.core.errors import UsageError
from kernel_harness.records.narrow import (
    adjust_tolerances,
    declared_without,
    describe_adjustments,
    drawn_dtypes,
    narrow,
    parse_features,
    without,
)
from kernel_harness.records.registry import family_names, get_family
from tests.helpers import toy_narrow

SDPA = get_family("sdpa")


def test_unknown_feature_is_a_usage_error_listing_the_known_ones():
    with pytest.raises(UsageError, match=r"no optional feature bais; known: .*bias.*window"):
        narrow(SDPA, {"bais"})


def test_family_without_optional_features_cannot_be_narrowed():
    with pytest.raises(UsageError, match="cannot be narrowed"):
        narrow(toy_narrow.TOY, {"long"})


def test_narrowing_by_nothing_is_the_family_itself():
    assert narrow(SDPA, frozenset()) is SDPA


def test_parse_features_and_declarations():
    assert parse_features(["bias,window", " mask "]) == {"bias", "window", "mask"}
    assert declared_without(toy_narrow.short_only) == {"long"}
    assert declared_without(toy_narrow.short_only_undeclared) == frozenset()

    def bad(x):
        return x

    bad.kernel_harness_without = "bias"  # a string is one name per letter: refused
    with pytest.raises(UsageError, match="must be a set of feature names"):
        declared_without(bad)
    assert without("a,b")(bad).kernel_harness_without == {"a", "b"}


def test_sdpa_unnarrowed_draws_bias_and_windows():
    # The control for the next test: without narrowing both features are reachable.
    # derandomized: a random find failed now and then (seen once in a full run)
    fixed = settings(database=None, derandomize=True, max_examples=2000)
    find(SDPA.cases(), lambda c: c.bias is not None, settings=fixed)
    find(SDPA.cases(), lambda c: c.window is not None, settings=fixed)


def test_sdpa_narrowed_never_draws_what_was_excluded_and_still_draws_the_rest():
    fam = narrow(SDPA, {"bias", "window", "gqa"})
    assert fam.without == {"bias", "window", "gqa"}
    seen = set()

    @settings(max_examples=60, database=None, deadline=None)
    @given(fam.cases())
    def draws(case):
        assert case.bias is None and case.window is None and case.kv_heads == case.q_heads
        seen.update(k for k in ("mask", "q_lengths", "kv_lengths", "scale")
                    if getattr(case, k) is not None)
        if case.is_causal:
            seen.add("causal")

    draws()
    # Nothing the user did not exclude was dropped.
    assert seen == {"mask", "q_lengths", "kv_lengths", "scale", "causal"}


def test_narrowing_accumulates_and_is_printed():
    fam = narrow(narrow(SDPA, {"bias"}), {"window"})
    assert fam.without == {"bias", "window"}
    assert describe_adjustments(fam) == ["checked without: bias, window"]


def test_features_the_configuration_left_out_say_where_from():
    fam = narrow(SDPA, {"bias", "window"})
    where = "from without in /r/pyproject.toml [tool.kernel-harness]"
    assert describe_adjustments(fam, {"bias": where}) == [
        f"checked without: window, bias ({where})"]
    assert describe_adjustments(fam, {"bias": where, "window": where}) == [
        f"checked without: bias, window ({where})"]


def test_tolerance_adjustment_is_recorded_and_validated():
    fam = adjust_tolerances(SDPA, ["out:bfloat16=0.03"], scale=2)
    assert fam.tolerances.lookup("bfloat16", "out").max_rel_err == 0.03
    assert fam.tolerances.lookup("float32", "out").max_rel_err == pytest.approx(2e-4)
    assert SDPA.tolerances.lookup("bfloat16", "out").max_rel_err == 1.5e-2  # untouched
    assert fam.adjustments == ("--tolerance-scale", "2", "--tolerance", "out:bfloat16=0.03")
    assert "NOT the family's defaults" in describe_adjustments(fam)[0]
    assert adjust_tolerances(SDPA) is SDPA
    for bad, message in [("nosuch=0.1", "no output 'nosuch'"),
                         ("out:float64=0.1", "no dtype 'float64'"),
                         ("out=2", "OUTPUT\\[:DTYPE\\]=X"), ("out", "OUTPUT")]:
        with pytest.raises(UsageError, match=message):
            adjust_tolerances(SDPA, [bad])


@pytest.mark.parametrize("name", family_names())
def test_every_family_declares_optional_features_its_strategy_accepts(name):
    fam = get_family(name)
    if not fam.optional:
        pytest.skip(f"{name} declares no optional features yet")
    # every name accepted together, and the strategy still draws
    find(fam.cases(without=frozenset(fam.optional)), lambda c: True,
         settings=settings(database=None))


def test_splash_narrowed_draws_none_of_the_excluded_features():
    from kernel_harness.ops.attention.masks import parse_mask

    fam = narrow(get_family("splash"), {"segments", "sinks", "soft-cap", "numpy-mask",
                                        "per-head-masks", "layouts"})

    @settings(max_examples=40, database=None, deadline=None)
    @given(fam.cases())
    def draws(case):
        assert case.q_segments is None and not case.sinks and case.soft_cap is None
        assert len(case.masks) == 1 and case.q_layout == case.k_layout == "head_dim_minor"
        mask = case.masks[0]
        assert mask == "full" or parse_mask(mask).kind in ("causal", "local", "chunked"), mask

    draws()


def test_flash_narrowed_draws_none_of_the_excluded_features():
    fam = narrow(get_family("flash"), {"causal", "segments", "bias", "q-len-ne-kv-len"})

    @settings(max_examples=30, database=None, deadline=None)
    @given(fam.cases())
    def draws(case):
        assert not case.is_causal and case.bias is None and case.q_segments is None
        assert case.q_len == case.kv_len

    draws()


@pytest.mark.parametrize("name", [n for n in family_names() if drawn_dtypes(get_family(n))])
def test_a_drawn_dtype_can_be_left_out_like_a_feature(name):
    """Issue 56: a bfloat16-only implementation is checked --without float32 (every family
    whose strategy draws dtypes): nothing else drawn, seeds and mode cases too, said."""
    fam = get_family(name)
    drawn = drawn_dtypes(fam)
    if len(drawn) == 1:
        with pytest.raises(UsageError, match=f"draws {drawn[0]}: without {drawn[0]} no dtype"):
            narrow(fam, {drawn[0]})
        return
    gone = drawn[0]
    narrowed = narrow(fam, {gone})
    assert gone in narrowed.without and drawn_dtypes(narrowed) == drawn[1:]
    assert all(c.dtype != gone for c in narrowed.seed_cases(narrowed.without))

    @settings(max_examples=8, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(narrowed.cases())
    def draws(case):
        assert case.dtype != gone

    draws()
    for strategy in narrowed.mode_cases.values():
        assert find(strategy(), lambda c: True, settings=settings(database=None)).dtype != gone


def test_a_dtype_the_family_never_draws_is_unknown():
    with pytest.raises(UsageError, match="no optional feature float16; known: .*bfloat16"):
        narrow(SDPA, {"float16"})
