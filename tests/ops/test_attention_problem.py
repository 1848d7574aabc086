"""ops.attention.problem/features/strategy/record: the attention problem every full-call
attention kernel's case is (sdpa, torch-sdpa), its one exclusion rule and labels."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from kernel_harness.core.case import Case
from kernel_harness.ops.attention.features import OPTIONAL, Features
from kernel_harness.ops.attention.problem import AttentionProblem
from kernel_harness.ops.attention.record import LABELS, constrain, events, problem_record, valid
from kernel_harness.ops.attention.strategy import (
    FAMILY_DRAWN,
    drawable,
    effective_options,
    problems,
)
from kernel_harness.ops.attention.vocabulary import Shape

NAMES = {"q": "q", "k": "k", "v": "v", "do": "do", "bias": "bias", "mask": "mask",
         "q_lengths": "q_lengths", "kv_lengths": "kv_lengths",
         "segment_ids_q": "segment_ids_q", "segment_ids_kv": "segment_ids_kv"}
#: The features the op's strategy draws (soft cap, sinks and static masks are drawn by
#: splash's own strategy so far).
DRAWN = frozenset(OPTIONAL) - FAMILY_DRAWN


@dataclasses.dataclass(frozen=True, kw_only=True)
class Everything(AttentionProblem):
    """A kernel taking every feature, rows without keys outside its contract."""

    FEATURES = Features(layout="bqhd", names=NAMES, magnitudes=("dq", "dk", "dbias"),
                        calibrated=frozenset({"bfloat16"}), optional=DRAWN)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OneMask(AttentionProblem):
    """A torch-like kernel: one attention-mask argument, refused with causal; empty rows
    give zero; heads first; no window or lengths."""

    block: int = 8

    FEATURES = Features(layout="bhqd", names={"q": "q", "k": "k", "v": "v", "do": "do",
                                              "bias": "mask", "mask": "mask"},
                        optional=frozenset({"bias", "mask", "causal", "scale", "gqa"}),
                        broadcasts=("full",), exclusive=(frozenset({"causal", "mask", "bias"}),),
                        empty_rows="zero", outputs={"dbias": "dmask"})


GOOD = dict(dtype="float32", seed=0, batch=2, q_heads=4, kv_heads=2, q_len=8, kv_len=16,
            head_dim=64)


def test_default_scale_and_query_spread() -> None:
    case = Everything(**GOOD, logit_scale=4.0)
    assert case.effective_scale == pytest.approx(1 / 8)
    # scale * q.k over head_dim standard-normal products: std logit_scale.
    assert case.q_scale * math.sqrt(case.head_dim) * case.effective_scale == pytest.approx(4.0)
    explicit = Everything(**GOOD, scale=0.5)
    assert explicit.effective_scale == 0.5 and explicit.q_scale == pytest.approx(1 / 4)
    assert case.sharing == "gqa" and case.group == 2


@pytest.mark.parametrize(("kind", "over", "message"), [
    (Everything, dict(kv_heads=3), "multiple of kv_heads"),
    (Everything, dict(q_heads=0), "q_heads"),
    (Everything, dict(q_len=0), "q_len"),
    (Everything, dict(mask_keep=0.0), "mask_keep"),
    (Everything, dict(scale=float("inf")), "scale must be positive and finite"),
    (Everything, dict(logit_scale=-1.0), "logit_scale"),
    (Everything, dict(bias="rows"), "bias must be None or one of"),
    (Everything, dict(q_lengths=(1,)), "q_lengths must be 2 values"),
    (Everything, dict(empty_row=True), "empty_row needs a mask"),
    (OneMask, dict(window=(1, 0)), "window: this kernel takes no window"),
    (OneMask, dict(mask="head-shared"), "mask='head-shared': this kernel takes the broadcasts"),
    (OneMask, dict(is_causal=True, bias="full"), "bias and is_causal: this kernel takes at most"),
])
def test_bad_cases_name_the_field(kind: type, over: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        kind(**{**GOOD, **over})


def test_a_declaration_naming_what_the_op_lacks_is_an_error() -> None:
    with pytest.raises(ValueError, match="Features.optional: unknown"):
        Features(layout="bqhd", names=NAMES, optional=frozenset({"dropout"}))
    with pytest.raises(ValueError, match="must name the sinks input"):
        Features(layout="bqhd", names=NAMES, optional=frozenset({"sinks"}))
    with pytest.raises(ValueError, match="must name the inputs"):
        Features(layout="bqhd", names={"q": "q"})


@pytest.mark.parametrize("bases", [(Shape, Case), (Case, Shape)], ids=["shape-first", "case-first"])
def test_a_shape_case_checks_heads_and_dtype_in_either_base_order(bases: tuple) -> None:
    kind = dataclasses.dataclass(frozen=True, kw_only=True)(type("Kind", bases, {}))
    sizes = dict(batch=1, q_heads=4, kv_heads=2, q_len=2, kv_len=2, head_dim=8)
    assert kind(dtype="float32", seed=0, **sizes).group == 2
    with pytest.raises(ValueError, match="multiple of kv_heads"):
        kind(dtype="float32", seed=0, **{**sizes, "kv_heads": 3})
    with pytest.raises(ValueError, match="dtype"):
        kind(dtype="int8", seed=0, **sizes)


@pytest.mark.parametrize(("kind", "q", "kv"), [(Everything, (2, 8, 4, 64), (2, 16, 2, 64)),
                                               (OneMask, (2, 4, 8, 64), (2, 2, 16, 64))])
def test_inputs_come_in_the_kernels_layout_and_names(kind: type, q: tuple, kv: tuple) -> None:
    x = kind(**GOOD, bias="full").materialize()
    assert x["q"].shape == q and x["k"].shape == x["v"].shape == kv and x["do"].shape == q
    assert x[kind.FEATURES.names["bias"]].shape == (2, 4, 8, 16)


def test_the_exclusion_rule_gives_valid_and_the_zero_cotangent_once() -> None:
    # a (0, 0) window with key lengths (16, 1): batch row 1's query rows 1.. see no key
    outside = Everything(**GOOD, window=(0, 0), kv_lengths=(16, 1))
    rows = outside.rows_outside()
    assert rows.shape == (2, 4, 8) and rows[1, :, 1:].all() and not rows[0].any()
    x = outside.materialize()
    assert not x["do"][1, 1:].any() and x["do"][0].all()
    assert valid(outside)["out"].shape == (2, 8, 4, 1) and not valid(outside)["dq"][1, 1:].any()
    redrawn = {**x, "do": np.ones_like(x["do"])}
    assert not constrain(outside, redrawn)["do"][1, 1:].any()
    # a kernel defining such rows (zero) has none outside: nothing excluded or zeroed
    zero = OneMask(**GOOD, mask="full", empty_row=True)
    assert zero.rows_without_keys()[:, :, 0].all() and not zero.rows_outside().any()
    assert valid(zero) == {} and zero.materialize()["do"][:, :, 0].all()


def test_segments_mask_by_id_under_the_one_exclusion_rule() -> None:
    # batch row 0: queries 4.. have id 1, which no key has; row 1: one segment
    case = Everything(**GOOD, q_segments=(((0, 4), (1, 4)), ((2, 8),)),
                      kv_segments=(((0, 9), (3, 7)), ((2, 16),)))
    assert not case.visible()[0, :, :, 9:].any() and case.visible()[1].all()
    rows = case.rows_outside()
    assert rows[0, :, 4:].all() and not rows[0, :, :4].any() and not rows[1].any()
    x = case.materialize()
    assert x["segment_ids_q"].tolist()[0] == [0] * 4 + [1] * 4
    assert x["segment_ids_kv"].dtype == np.int32 and not x["do"][0, 4:].any()
    assert not valid(case)["out"][0, 4:].any()
    assert {"segments", "several-segments", "rows-without-keys"} <= set(events(case))
    assert "q_segments" in effective_options(case)
    hooks = problem_record(Everything)["metamorphic"]
    assert hooks.segments(case)[1].shape == (2, 16)
    assert hooks.may_be_nonfinite(case)["out"][0, 4:].all()
    with pytest.raises(ValueError, match="both be given"):
        Everything(**GOOD, q_segments=(((0, 8),), ((0, 8),)))


class BiasFirst(Everything):
    """A kernel adding its bias before the scale: the bias is drawn over the scale."""

    FEATURES = dataclasses.replace(Everything.FEATURES, bias_before_scale=True,
                                   absent_dbias="full")


def test_a_bias_before_the_scale_is_drawn_over_it() -> None:
    plain = Everything(**GOOD, bias="full", scale=0.25).materialize()["bias"]
    first = BiasFirst(**GOOD, bias="full", scale=0.25).materialize()["bias"]
    np.testing.assert_allclose(first, plain * 4.0, rtol=1e-6)
    case = BiasFirst(**GOOD)
    assert problem_record(BiasFirst)["reference"](case, case.materialize())["dbias"].shape == (
        2, 4, 8, 16)


def test_padding_rows_are_inside_the_contract() -> None:
    case = Everything(**GOOD, q_lengths=(2, 0))
    assert case.padding_rows()[0, 2:].all() and not case.rows_outside().any()
    assert "padding-rows" in events(case) and valid(case) == {}


def test_stored_cases_upgrade_through_the_case_type() -> None:
    class Old(OneMask):
        @classmethod
        def upgraded(cls, data: dict) -> dict:
            return {**data, "mask": "full"} if data.get("mask") == "bool" else data

    text = OneMask(**GOOD, mask="full").to_json().replace('"mask":"full"', '"mask":"bool"')
    assert Old.from_json(text) == Old(**GOOD, mask="full")
    with pytest.raises(ValueError, match="mask must be None or one of"):
        OneMask.from_json(text)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(problems(Everything)())
def test_every_drawn_option_takes_effect_and_labels_come_from_the_op(case) -> None:
    assert Everything.from_json(case.to_json()) == case and drawable(case)
    used = {o for o in ("is_causal", "window", "mask", "kv_lengths", "q_lengths")
            if getattr(case, o) not in (None, False)}
    assert used <= set(effective_options(case))
    assert {e for e in events(case) if not e.startswith("logits-")} <= LABELS


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(problems(OneMask)())
def test_a_kernels_declaration_bounds_what_is_drawn(case) -> None:
    assert not {"window", "q-lengths", "kv-lengths"} & OneMask.FEATURES.used(case)
    assert sum((case.is_causal, case.mask is not None, case.bias is not None)) <= 1
    assert case.block == 8 and {case.bias, case.mask} <= {None, "full"}


@pytest.mark.parametrize("feature", sorted(DRAWN))
def test_without_a_feature_it_is_never_drawn(feature: str) -> None:
    @settings(max_examples=25, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(problems(Everything)(without=frozenset({feature})))
    def check(case) -> None:
        assert feature not in Everything.FEATURES.used(case)
        if feature == "gqa":
            assert case.kv_heads == case.q_heads
        if feature == "q-len-ne-kv-len":
            assert case.q_len == case.kv_len
        if feature == "unaligned-lengths":
            assert case.q_len % 128 == 0 and case.kv_len % 128 == 0

    check()


def test_an_unknown_feature_is_an_error_naming_the_known() -> None:
    @settings(max_examples=1, database=None)
    @given(problems(OneMask)(without=frozenset({"window"})))
    def draw(case) -> None:
        del case

    with pytest.raises(ValueError, match="unknown optional features.*known: .*bias"):
        draw()


def test_the_record_names_outputs_the_kernels_way() -> None:
    record = problem_record(OneMask)
    case = OneMask(**GOOD, is_causal=True)
    assert set(record["output_axes"]) == {"out", "dq", "dk", "dv", "dmask"}
    assert record["not_compared"](case) == {"dmask": "no bias in this case"}
    assert set(record["optional"]) == set(OneMask.FEATURES.optional)
    assert "kv_lengths" not in record["metamorphic"].roles



@dataclasses.dataclass(frozen=True, kw_only=True)
class FlashAttnLike(AttentionProblem):
    """A forward-only kernel aligning causal masks bottom-right, with one block size."""

    block_q: int = 4

    FEATURES = Features(layout="bhqd", names={"q": "q", "k": "k", "v": "v"},
                        optional=frozenset({"causal", "q-lengths", "kv-lengths", "gqa",
                                            "q-len-ne-kv-len"}),
                        alignments=("bottom-right",), gradients=False, empty_rows="zero")


BOTTOM_RIGHT = dict(GOOD, is_causal=True, alignment="bottom-right")


def test_bottom_right_causal_puts_the_last_query_on_the_last_key() -> None:
    vis = FlashAttnLike(**BOTTOM_RIGHT).visible()  # q_len 8, kv_len 16
    assert vis[0, 0, 0].sum() == 9 and vis[0, 0, -1].all()
    top_left = Everything(**GOOD, is_causal=True).visible()
    assert top_left[0, 0, 0].sum() == 1
    # with lengths, each sequence's own: row b's last real query sees its last real key
    ragged = FlashAttnLike(**BOTTOM_RIGHT, q_lengths=(8, 3), kv_lengths=(16, 5)).visible()
    assert ragged[1, 0, 2, :5].all() and ragged[1, 0, 0, :3].all() and not ragged[1, 0, 0, 3:].any()
    with pytest.raises(ValueError, match="alignment must be one of"):
        Everything(**GOOD, alignment="centre")


def test_a_forward_only_kernel_gets_no_cotangent_and_only_out() -> None:
    case = FlashAttnLike(**BOTTOM_RIGHT)
    assert set(case.materialize()) == {"q", "k", "v"}
    record = problem_record(FlashAttnLike)
    assert set(record["output_axes"]) == {"out"} and "do" not in record["metamorphic"].roles
    assert set(record["reference"](case, case.materialize())) == {"out"}
    assert record["not_compared"](case) == {} and "bottom-right" in events(case)


def test_block_size_invariance_redraws_the_kernels_blocks() -> None:
    from hypothesis import strategies as st

    def blocks(problem):
        return st.fixed_dictionaries({"block_q": st.sampled_from((1, 2, 4, 8))})

    record = problem_record(FlashAttnLike, blocks=blocks)
    case = FlashAttnLike(**BOTTOM_RIGHT)

    @settings(max_examples=20, database=None, deadline=None)
    @given(record["metamorphic"].block_variants(case))
    def check(variant) -> None:
        assert dataclasses.replace(variant, block_q=case.block_q) == case

    check()


@dataclasses.dataclass(frozen=True, kw_only=True)
class SinksAndMasks(AttentionProblem):
    """A splash-like kernel: q pre-scaled, static per-head masks, one segment layout for
    every batch row, sinks, each input from its own stream."""

    FEATURES = Features(layout="bhqd", names={"q": "q", "k": "k", "v": "v", "do": "do",
                                              "sinks": "sinks", "segment_ids_q": "qs",
                                              "segment_ids_kv": "ks"},
                        optional=frozenset({"segments", "sinks", "soft-cap", "head-dim-v", "gqa"}),
                        static_masks=True, segment_rows="shared", streams="per-input",
                        fixed_scale=1.0, magnitudes=("dq", "dk", "dsinks"), lse="natural")


SPLASHY = dict(dtype="float32", seed=3, batch=2, q_heads=2, kv_heads=1, q_len=8, kv_len=8,
               head_dim=16)


def test_sinks_bring_rows_without_keys_into_the_contract() -> None:
    # Head 1's first row sees no key (causal, offset -1): outside without sinks, defined with.
    case = SinksAndMasks(**SPLASHY, masks=("full", "causal(offset=-1)"))
    assert case.rows_without_keys()[:, 1, 0].all() and case.rows_outside()[:, 1, 0].all()
    assert valid(case)["out"].shape == (2, 2, 8, 1) and not valid(case)["out"][0, 1, 0, 0]
    record = problem_record(SinksAndMasks)
    assert record["not_compared"](case) == {"dsinks": "no sinks in this case"}
    assert record["reference"](case, case.materialize())["dsinks"].shape == (0,)
    sinks = dataclasses.replace(case, sinks=True)
    assert not sinks.rows_outside().any() and valid(sinks) == {}
    assert not sinks.keyless_lse_rows().any()
    out = record["reference"](sinks, sinks.materialize())
    assert out["dsinks"].shape == (2,) and np.isfinite(out["lse"]).all()
    assert record["not_compared"](sinks) == {}
    toggled = {t.name for t in record["metamorphic"].option_toggles(sinks)}
    assert "sinks" not in toggled, "without sinks that row would leave the contract"


def test_one_segment_layout_for_every_row_and_inputs_of_their_own_streams() -> None:
    runs = ((0, 3), (1, 5))
    case = SinksAndMasks(**SPLASHY, masks=("full",), q_segments=(runs, runs),
                         kv_segments=(runs, runs), sinks=True, head_dim_v=32, logit_scale=4.0)
    inputs = case.materialize()
    assert inputs["qs"].shape == (8,) and inputs["ks"].shape == (8,)
    assert inputs["v"].shape == (2, 1, 8, 32) and inputs["do"].shape == (2, 2, 8, 32)
    # q pre-scaled: logits q.k ~ N(0, 4^2) with scale 1; each input from its own stream.
    assert case.effective_scale == 1.0
    np.testing.assert_array_equal(
        inputs["q"], (case.rng(0).standard_normal((2, 2, 8, 16)) * 4.0 / 4.0).astype(np.float32))
    assert inputs["sinks"].shape == (2,) and inputs["sinks"].dtype == np.float32
    with pytest.raises(ValueError, match="one segment layout for every batch row"):
        dataclasses.replace(case, q_segments=(runs, ((0, 8),)), kv_segments=(runs, runs))
    with pytest.raises(ValueError, match="takes no static masks"):
        Everything(**GOOD, masks=("full",))


def test_one_static_mask_for_every_head_is_split_over_head_shards() -> None:
    case = SinksAndMasks(**{**SPLASHY, "kv_heads": 2}, masks=("causal(offset=0)",) * 2)
    local = problem_record(SinksAndMasks, shardable=True)["metamorphic"].local_case(
        case, {"head": 2})
    assert (local.q_heads, local.masks) == (1, ("causal(offset=0)",))
    per_head = dataclasses.replace(case, masks=("full", "causal(offset=0)"))
    assert problem_record(SinksAndMasks, shardable=True)["metamorphic"].local_case(
        per_head, {"head": 2}) is None


def test_a_declaration_its_design_or_streams_cannot_serve_is_an_error() -> None:
    with pytest.raises(ValueError, match="declare the plain design"):
        Features(layout="bhqd", names=NAMES, precision_design="flash")  # it takes a bias
    with pytest.raises(ValueError, match="output is unnormalized"):
        Features(layout="bhqd", names=NAMES, optional=frozenset({"causal"}),
                 precision_design="flash", normalize="none")
    with pytest.raises(ValueError, match="not a bias or a mask"):
        Features(layout="bhqd", names=NAMES, streams="per-input")
