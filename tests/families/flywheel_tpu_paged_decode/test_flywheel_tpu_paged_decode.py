"""flywheel-tpu-paged-decode (issue 56, item 4): flywheel-tpu's flash_attn_with_kvcache as
a paged single-token decode on the paged op. The case's merged layout and its poison, the
library's q rounding in the op's call, and the project's declared known bug (no library
needed); with flywheel-tpu (Python 3.12): a small case passes and the NaN-past-lengths
finding fails it, as the finding says (every mutant: nightly)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings

from kernel_harness.core.backends import resolve_backend
from kernel_harness.families.flywheel_tpu_paged_decode.cases import (
    FlywheelDecodeCase,
    flywheel_decode_cases,
)
from kernel_harness.families.flywheel_tpu_paged_decode.family import FINDING, paged_call
from kernel_harness.orchestration import options
from kernel_harness.orchestration.session import CheckSession
from kernel_harness.orchestration.session_header import adjustment_lines
from kernel_harness.records.config import load_config
from kernel_harness.records.registry import get_family
from kernel_harness.run.runner import check_case
from tests.helpers.libraries import flywheel_installed_or_skip

NAME = "flywheel-tpu-paged-decode"
ROOT = Path(__file__).resolve().parents[3]

#: GQA over two pages, a row ending one past a page edge and a one-token row, a soft cap.
SMALL = FlywheelDecodeCase(dtype="bfloat16", seed=5, batch=2, q_heads=4, kv_heads=2,
                           head_dim=128, page_size=128, pages_per_seq=2, lengths=(129, 1),
                           soft_cap=30.0)


def test_the_merged_cache_holds_k_then_v_of_each_head_and_poisons_past_the_lengths():
    nan = dataclasses.replace(SMALL, past_length="nan")
    for case in (SMALL, nan):
        x = case.materialize()
        call = paged_call(case, x)
        kv = np.asarray(x["kv_cache"], np.float32)
        assert kv.shape == (case.total_pages, 128, 4, 128)
        np.testing.assert_array_equal(call.k_pages[1], kv[:, :, 2])
        np.testing.assert_array_equal(call.v_pages[1], kv[:, :, 3])
        table, seen = x["block_table"], case.visible()
        page, slot = table[0, 129 // 128], 129 % 128  # the first slot past row 0's end
        past = kv[page, slot]
        assert seen[0, 128] and not seen[0, 129]
        assert np.isnan(past).all() if case.past_length == "nan" else (
            (past[0::2] == 0).all() and (np.abs(past[1::2]) == 1e3).all())
        assert np.isfinite(kv[table[1, 0], 0]).all()  # row 1's one token


def test_the_op_call_rounds_q_as_the_library_does():
    """q reaches the logits as bf16(q * scale * log2 e) / log2 e (with a cap: bf16(q *
    scale / cap) * cap, the cap's tanh then taking it back): the library's fused scale."""
    for cap, fused in ((None, 128**-0.5 * math.log2(math.e)), (30.0, 128**-0.5 / 30.0)):
        case = dataclasses.replace(SMALL, soft_cap=cap)
        x = case.materialize()
        q = np.asarray(x["q"], np.float32)
        rounded = np.asarray(jnp.asarray(q * np.float32(fused), jnp.bfloat16), np.float32)
        np.testing.assert_allclose(paged_call(case, x).q * fused / case.softmax_scale,
                                   rounded, rtol=1e-6)


@settings(max_examples=30, deadline=None, database=None)
@given(flywheel_decode_cases(without=frozenset({"nan-past-lengths"})))
def test_without_the_feature_no_nan_is_drawn(case):
    assert case.past_length == "masked"


def test_the_project_declares_the_finding_a_known_bug_and_every_verdict_says_so():
    (bug,) = [b for b in load_config(ROOT).known_bugs if b["family"] == NAME]
    assert tuple(bug["without"]) == ("nan-past-lengths",) and bug["link"] == FINDING
    meta = json.loads((ROOT / FINDING / "finding.json").read_text())
    assert meta["expect_exit"] == 1 and "flywheel_tpu" in meta["requires"]
    flywheel_installed_or_skip()  # a session needs the family runnable here
    config = load_config(ROOT)
    request = options.check_request(
        options.settings(config, {}, {"profile": "dev", "backend": "interpret",
                                      "corpus": None}),
        config, families=(NAME,), properties=("matches-reference",), max_examples=1)
    session = CheckSession(request, emit=lambda line: None)
    family = session.families[0]
    assert family.without == {"nan-past-lengths"}
    (line,) = adjustment_lines(session, family)
    assert line.startswith("checked without: nan-past-lengths (known bug: ")
    assert FINDING in line and "pyproject.toml" in line


def test_a_small_case_passes_and_nan_past_the_lengths_fails_it():
    """The finding, reached by the family's own case: NaN past cache_seqlens (V) gives a
    NaN output; the same case with masked slots passes."""
    flywheel_installed_or_skip()
    family, backend = get_family(NAME), resolve_backend("interpret")
    result = check_case(family, SMALL, backend)
    assert result.passed, [v.problems for v in result.verdicts]
    poisoned = check_case(family, dataclasses.replace(SMALL, past_length="nan"), backend)
    assert not poisoned.passed
    assert any("nan" in p.lower() for v in poisoned.failures for p in v.problems)


@pytest.mark.nightly
def test_every_mutant_is_killed_with_the_known_bug_left_out():
    """``mutate``'s runs, the control's included, leave the project's known bug out as
    ``check`` does: the control passes and every mutant is killed (about 3 minutes)."""
    flywheel_installed_or_skip()
    from kernel_harness.families.flywheel_tpu_paged_decode.mutants import MUTANTS
    from kernel_harness.regression import mutate

    results = mutate.run_many(NAME, [None, *MUTANTS], properties=("matches-reference",),
                              golden=False, first_kill=True)
    assert results[0].status == "PASS", results[0]
    assert [r.mutant for r in results[1:] if r.status != "KILLED"] == []
