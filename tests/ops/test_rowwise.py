"""The row-wise op and the generic pieces a new op starts from (issue 41 item 2): a
blocked elementwise op family of under 40 lines (tests/helpers/rope_family.py: a fused
rotary embedding with a Pallas backward) gets matches-reference, block-size-invariance,
deterministic and finite-out running, not SKIP; its planted block bug fails
block-size-invariance, which uses no reference; block-aware sizes reach whole, partial and
sub-block sizes; the export hook writes a script from the reference's own source."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_harness import block_aware_sizes, block_events, block_variants, cli
from kernel_harness.records import registry
from tests.helpers import rope_family

ROOT = Path(__file__).resolve().parents[2]
GENERIC = ("matches-reference", "block-size-invariance", "deterministic", "finite-out")


@pytest.fixture(autouse=True)
def rope_registered(monkeypatch):
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "rope", "tests.helpers.rope_family:FAMILY")


def _check(capsys, tmp_path, *args):
    out = tmp_path / "r.json"
    code = cli.main(["check", "--no-isolate", "rope", "--profile", "dev", "--seed", "1",
                     "--shrink-budget", "0", "--json", str(out),
                     *(a for p in GENERIC for a in ("--property", p)), *args])
    records = {r["property"]: r for r in json.loads(out.read_text())["properties"]}
    return code, capsys.readouterr().out, records


def test_the_family_is_small():
    lines = Path(rope_family.__file__).read_text().splitlines()
    assert len(lines) <= 40, len(lines)


def test_a_user_op_of_40_lines_gets_the_generic_properties(capsys, tmp_path):
    code, out, records = _check(capsys, tmp_path)
    assert code == 0, out[-3000:]
    for prop in GENERIC:
        assert records[prop]["verdict"] == "PASS" and records[prop]["examples"] >= 1, prop
    assert "pallas kernels: fwd 1, bwd 1" in out  # the kernel's own backward ran


def test_its_planted_block_bug_fails_block_size_invariance(capsys, tmp_path):
    code, out, records = _check(capsys, tmp_path, "--impl",
                                "tests.helpers.rope_kernel:rope_written_for_32")
    assert code == 1
    assert records["block-size-invariance"]["verdict"] == "FAIL", out[-3000:]
    assert "changed that must not (only block sizes differ)" in out
    assert records["deterministic"]["verdict"] == "PASS"  # it is wrong, not random


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.sampled_from((1, 8, 16)).flatmap(lambda b: st.tuples(st.just(b),
                                                                 block_aware_sizes(b))))
def test_block_aware_sizes_stay_within_the_blocks(drawn):
    block, size = drawn
    assert 1 <= size <= 3 * block


def test_block_aware_sizes_reach_every_edge():
    seen = set()

    @settings(max_examples=100, deadline=None, derandomize=True)
    @given(block_aware_sizes(8))
    def collect(size):
        seen.update(block_events(size, 8) or ["one-whole-block"])

    collect()
    assert seen == {"one-whole-block", "multi-row-block", "partial-last-row-block",
                    "rows-below-one-block"}, seen

    @settings(max_examples=50, deadline=None, derandomize=True)
    @given(block_aware_sizes(8, partial=False))
    def whole(size):
        assert size % 8 == 0

    whole()


def test_block_variants_change_only_the_named_fields():
    case = rope_family.RopeCase(dtype="float32", seed=3, rows=40, width=64, block_rows=8)
    hook = block_variants({"block_rows": (8, 16, 32)})
    seen = set()

    @settings(max_examples=30, deadline=None, derandomize=True)
    @given(hook(case))
    def collect(variant):
        assert dataclasses.replace(variant, block_rows=8) == case
        assert all(np.array_equal(a, b) for a, b in zip(
            variant.materialize().values(), case.materialize().values(), strict=True))
        seen.add(variant.block_rows)

    collect()
    assert seen == {8, 16, 32}
    with pytest.raises(ValueError, match="has no field"):
        block_variants({"block_q": (8,)})(case).example()
    with pytest.raises(ValueError, match="choices"):
        block_variants({"block_rows": ()})


def test_a_case_the_case_type_refuses_is_not_drawn_as_a_variant():
    class Whole(rope_family.RopeCase):
        PARTIAL_BLOCKS = False

    case = Whole(dtype="float32", seed=0, rows=32, width=2, block_rows=16)
    variants = set()

    @settings(max_examples=20, deadline=None, derandomize=True)
    @given(block_variants({"block_rows": (16, 24)})(case))
    def collect(variant):
        variants.add(variant.block_rows)

    collect()
    assert variants == {16}  # 24 does not divide 32: refused by the case type
    with pytest.raises(ValueError, match="multiple of block_rows"):
        Whole(dtype="float32", seed=0, rows=40, width=2, block_rows=16)


def test_the_export_hook_embeds_the_reference_source(tmp_path):
    case = '{"block_rows":16,"dtype":"bfloat16","rows":40,"seed":3,"width":64}'
    script = tmp_path / "rope_repro.py"
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    made = subprocess.run([sys.executable, "-m", "kernel_harness.cli", "--family-module",
                           "tests.helpers.rope_family", "export-repro", "rope", "--case", case,
                           "--out", str(script)], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)
    assert made.returncode == 0, made.stderr
    text = script.read_text()
    assert "def rope_reference(x, cos, sin):" in text  # the reference's own source
    assert "import kernel_harness" not in text and "from kernel_harness" not in text
    ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "ok   out" in ran.stdout and "ok   dx" in ran.stdout


def test_bad_input_runs_a_user_familys_list(capsys):
    assert cli.main(["bad-input", "rope"]) == 0
    out = capsys.readouterr().out
    assert "tables of the wrong width" in out and "CLEAR" in out
