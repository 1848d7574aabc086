"""The worked example of a user's own chunked recurrence (``examples/chunked_delta_rule.py``,
issue 57 item 4): a float32 Pallas forward kernel of the delta rule, chunk by chunk with the
state carried across chunks, put under the harness with the public API only.

It stays within 200 lines (the kernel included), imports only ``kernel_harness``'s public
names, and gets every applicable property: matches-reference, block-size invariance over
the chunk size, deterministic, finite-out, gqa-equals-mha and the op's relations
(state-continuity, documents-independent, linear-in-v); its planted bug (a document
starting on a chunk's first token keeps the previous document's state) fails. Per push: a
dev-profile run (~20 s); nightly: ``check --profile ci`` through the CLI, as the docs give
it."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kernel_harness import resolve_backend, testing
from kernel_harness.testing import HarnessCheckFailed

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "chunked_delta_rule.py"
MODULE = "examples.chunked_delta_rule"
#: The properties that apply to a forward-only delta-rule family on the interpret backend.
APPLICABLE = {"matches-reference", "block-size-invariance", "deterministic", "finite-out",
              "gqa-equals-mha", "state-continuity", "documents-independent", "linear-in-v"}
#: Attention's roles (the op has none: documents-independent is its segment isolation),
#: the TPU interpreter's schedule, TPU lowering (K, V of 8 and 16 are below Mosaic's tiles)
#: and claimed sizes (none claimed: nothing traced, nothing run at large sizes).
NOT_APPLICABLE = {"invisible-inputs-ignored", "segment-isolation", "option-effect",
                  "schedule-invariance", "lowers-for-tpu", "claimed-sizes", "large-sizes"}


@pytest.fixture(scope="module")
def example():
    return importlib.import_module(MODULE)


def test_it_is_the_public_api_only_in_at_most_200_lines() -> None:
    text = EXAMPLE.read_text()
    assert len(text.splitlines()) <= 200
    imported = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ImportFrom)]
    harness = [n for n in imported if n.module and n.module.startswith("kernel_harness")]
    assert [n.module for n in harness] == ["kernel_harness"]
    assert not any(a.name.startswith("_") for n in harness for a in n.names)
    assert not any(isinstance(n, ast.Import) and any(a.name.startswith("kernel_harness")
                                                     for a in n.names)
                   for n in ast.walk(ast.parse(text)))


def test_the_planted_bug_differs_only_where_a_document_starts_on_a_chunk_edge(example):
    """The seed case's first row starts its second document on token 16, the second
    chunk's first: the bug changes that row's out from there on, and nothing before."""
    case = example.seed_cases(frozenset())[0]
    inputs = case.materialize()
    backend = resolve_backend("interpret")
    good = example.FAMILY.run(example.delta_rule, case, inputs, backend)
    bad = example.FAMILY.run(example.resets_inside_chunks_only, case, inputs, backend)
    np.testing.assert_array_equal(good["out"][:, :16], bad["out"][:, :16])
    np.testing.assert_array_equal(good["out"][1], bad["out"][1])  # boundary inside a chunk
    assert np.abs(good["out"][0, 16:] - bad["out"][0, 16:]).max() > 1e-2


# Nightly: the pristine example on every property; its planted bug fails per push
# (below), and the delta-rule op's families (gdn2-pallas, deltanet-tpu-gdn2) keep their
# per-push tests and goldens.
@pytest.mark.nightly
def test_every_applicable_property_passes(example) -> None:
    result = testing.check(example.FAMILY, profile="dev", seed=1)
    verdicts = {u.prop: u.verdict for u in result.results}
    assert {p for p, v in verdicts.items() if v == "PASS"} == APPLICABLE
    assert {p for p, v in verdicts.items() if v == "SKIP"} == NOT_APPLICABLE


def test_the_planted_bug_fails_matches_reference(example) -> None:
    with pytest.raises(HarnessCheckFailed, match=r"=== chunked-delta-rule / matches-reference: "
                       r"FAIL ===[\s\S]*FAIL chunked-delta-rule out float32[\s\S]*impl: "
                       r"examples.chunked_delta_rule:resets_inside_chunks_only"):
        testing.check(example.FAMILY, impl=example.resets_inside_chunks_only, profile="dev",
                      properties=["matches-reference"], seed=1, shrink_budget="0")


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KH_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "kernel_harness.cli", "check",
                           "chunked-delta-rule", "--family-module", MODULE, *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.nightly
def test_ci_profile_passes_and_the_planted_bug_fails_through_the_cli() -> None:
    ok = _cli("--profile", "ci")
    assert ok.returncode == 0, (ok.stdout + ok.stderr)[-4000:]
    assert "PASS: 8/8 properties passed on backend interpret" in ok.stdout
    bad = _cli("--profile", "ci", "--impl", f"{MODULE}:resets_inside_chunks_only",
               "--shrink-budget", "0")
    assert bad.returncode == 1, (bad.stdout + bad.stderr)[-4000:]
    assert "chunked-delta-rule / matches-reference FAILED" in bad.stdout
