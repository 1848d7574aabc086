"""Every size the kernel claims, run for real (issue 55, item 5): ``claimed-sizes`` only
traces the claimed sizes, so an implementation whose program is the same at every size but
whose answer is wrong past the drawn sizes (a slice, a pad) passed every check.
``large-sizes`` runs real examples up to the claimed sizes, capped by the profile's tier,
and compares them with the reference as ``matches-reference`` does: the same report, and
a repro command that replays exactly the failing case."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_harness import cli, testing
from kernel_harness.checks.large_sizes import large_sizes
from kernel_harness.core.backends import resolve_backend
from kernel_harness.core.errors import PropertyNotApplicable
from kernel_harness.ops.softmax.cases import softmax_cases
from kernel_harness.records.claims import Span, log_sizes
from kernel_harness.records.registry import get_family
from kernel_harness.run import profiles
from kernel_harness.testing import HarnessCheckFailed

PLANTED = "tests.helpers.size_gated"


def _failure(family: str, impl: str, **kw) -> str:
    with pytest.raises(HarnessCheckFailed) as e:
        testing.check(family, impl=f"{PLANTED}:{impl}", profile="ci",
                      properties=["large-sizes"], **kw)
    return str(e.value)


# Nightly: the pristine kernel.
@pytest.mark.nightly
@pytest.mark.triton_ops
def test_the_pristine_softmax_passes_at_large_sizes():
    testing.check("gpu-softmax", profile="ci", properties=["large-sizes"])


@pytest.mark.triton_ops
def test_a_softmax_wrong_past_the_drawn_rows_fails_naming_the_size_and_replays(capsys):
    impl = "logits_past_2048_dropped_softmax"
    # The drawn rows (<= 1025 logits) pass it; the traced claimed sizes see the same
    # primitives at every size (a slice and a pad); since round 9 the wrapper compared with
    # the kernel stood in for names it (its kernel is handed other logits), and since round
    # 11, first, the kernel compared with the family's there (it is handed a narrower row).
    with pytest.raises(testing.HarnessCheckFailed,
                       match="kernel 1 is handed other inputs|kernel 1, the family's kernel 1 "
                             "at the small size, is another kernel here"):
        testing.check("gpu-softmax", impl=f"{PLANTED}:{impl}", profile="ci",
                      properties=["claimed-sizes"])
    testing.check("gpu-softmax", impl=f"{PLANTED}:{impl}", profile="dev",
                  properties=["matches-reference"], seed=1)
    text = _failure("gpu-softmax", impl)
    # matches-reference's report: the FAIL line names the output, dtype and size; the first
    # example is at the ci caps (the simplest draw of every span is its top).
    assert "FAIL gpu-softmax out bfloat16 x=(2, 262144)" in text, text
    repro = next(line.split("reproduce: ", 1)[1] for line in text.splitlines()
                 if "reproduce: kernel-harness repro gpu-softmax" in line)
    argv = shlex.split(repro)
    assert f"{PLANTED}:{impl}" in argv and '"n":262144' in argv[argv.index("--case") + 1]
    capsys.readouterr()
    assert cli.main(argv[1:]) == 1  # the case alone fails again, with the same report
    assert "FAIL gpu-softmax out bfloat16 x=(2, 262144)" in capsys.readouterr().out


# Nightly: the softmax's planted size bug takes the same path per push.
@pytest.mark.nightly
def test_a_norm_wrong_past_the_drawn_rows_fails_and_the_pristine_passes():
    testing.check("gpu-norm", profile="dev", properties=["large-sizes"])
    text = _failure("gpu-norm", "rows_shifted_past_200_norm", max_examples=1)
    assert "FAIL gpu-norm out bfloat16 layer_norm x=(1,300,1024)" in text, text


def test_a_family_without_large_examples_is_a_skip_saying_so():
    with pytest.raises(PropertyNotApplicable, match="declares no large examples"):
        large_sizes(get_family("gpu-decode"), backend=resolve_backend("interpret"))


@pytest.mark.parametrize("family", ["gpu-softmax", "gpu-norm", "megablox-gmm", "gpu-mha"])
def test_every_claiming_family_declares_both_tiers_and_describe_prints_them(family):
    claim = get_family(family).claimed
    assert claim is not None and claim.large is not None
    assert set(claim.large.tiers) == {"ci", "nightly"}
    text = "\n".join(claim.describe())
    assert "large sizes (real examples" in text and "\n  ci" in text and "\n  nightly: " in text


def test_gpu_mha_draws_head_dim_128_at_large_sizes_in_every_dtype():
    large = get_family("gpu-mha").claimed.large
    spans = large.tier("ci").spans
    assert all(s["head_dim"].high == 128 for s in spans)


def test_the_profiles_budget_the_examples_and_pick_a_tier():
    assert profiles.large_sizes("ci") == profiles.LargeSizeBudget(examples=2, tier="ci")
    assert profiles.large_sizes(profiles.get_profile("nightly")).tier == "nightly"
    assert profiles.large_sizes(settings(max_examples=3)).tier == "ci"


@given(st.data())
@settings(max_examples=30, database=None)
def test_log_sizes_stay_in_their_span_on_its_multiple(data):
    span = Span(256, 4352, 128)
    value = data.draw(log_sizes(span))
    assert 256 <= value <= 4352 and value % 128 == 0


def test_the_first_large_example_is_at_the_caps():
    """Hypothesis runs the simplest draw first, and a span's simplest draw is its top."""
    from hypothesis import find

    assert find(log_sizes(Span(1026, 262144)), lambda v: True) == 262144
    seen = []

    @given(softmax_cases(dtypes=("float32",), sizes={"n": Span(1026, 32000),
                                                     "leading[0]": Span(1, 64)}))
    @settings(max_examples=1, database=None, derandomize=True)
    def first(case):
        seen.append((case.leading, case.n))

    first()
    assert seen == [((64,), 32000)]


def test_the_ordinary_strategy_draws_as_before():
    """No ``sizes``: the draws of matches-reference (and the stored goldens) are unchanged:
    the ordinary strategy never reaches the large spans."""
    @given(softmax_cases())
    @settings(max_examples=40, database=None, derandomize=True)
    def check(case):
        assert case.n <= 1025

    check()
