"""gdn2-pallas 0.1.1's fused Pallas GDN-2 (issue 57): without the library the family says
what to install; with it (both stacks) the library's public, dispatching
``gdn2_forward_trainable`` fails the kernel count off a TPU (its silent pure-JAX fallback,
issue 55), the pristine Pallas path passes its seed cases and fails the burst decay regime
(findings/gdn2-pallas-fp32-burst-decay-precision/), and planted bugs are seen."""

from __future__ import annotations

import dataclasses

import pytest

from kernel_harness.cli import main
from kernel_harness.core.backends import BackendUnavailable, resolve_backend
from kernel_harness.families.gdn2_pallas import kernel as _kernel
from kernel_harness.families.gdn2_pallas.cases import Gdn2Case
from kernel_harness.families.gdn2_pallas.mutants import MUTANTS
from kernel_harness.records.mutant import patched_source
from kernel_harness.records.registry import get_family
from kernel_harness.run.runner import check_case
from tests.helpers.golden_export import export_and_run

NAME = "gdn2-pallas"

#: One row, one chunk of 64, float32: the cheapest case the library takes.
SMALL = Gdn2Case(dtype="float32", seed=3, batch=1, seq_len=64, chunk_size=64,
                 micro_block=16, qk_l2norm=False)


def installed_or_skip() -> None:
    if not _kernel.available():
        pytest.skip(f"gdn2-pallas is not installed: {_kernel.INSTALL}")


def test_without_the_library_the_family_says_what_to_install():
    family = get_family(NAME)
    assert "--no-deps" in family.requires and "gdn2-pallas==0.1.1" in family.requires
    assert bool(family.backends) == _kernel.available()
    if not _kernel.available():
        with pytest.raises(BackendUnavailable, match=r"none here \(needs gdn2-pallas"):
            check_case(family, SMALL, resolve_backend("interpret"))


def test_the_case_refuses_what_the_library_cannot_take():
    for changes, field in (({"seq_len": 96}, "seq_len"), ({"micro_block": 24}, "micro_block"),
                           ({"qk_l2norm": True}, "qk_l2norm"),
                           ({"value_heads": 2}, "key_heads"),
                           ({"documents": ((32, 32),)}, "documents")):
        with pytest.raises(ValueError, match=field):
            dataclasses.replace(SMALL, **changes)


def test_every_mutant_applies_to_the_installed_source():
    installed_or_skip()
    assert len(MUTANTS) >= 5
    for mutant in MUTANTS:
        patched_source(mutant)


def test_the_backward_clip_is_restored_after_a_run():
    installed_or_skip()
    pipeline = _kernel.library().gdn2_pipeline
    before = pipeline._FINAL_CLIP
    with _kernel.backward_clip(_kernel.CLIP):
        assert pipeline._FINAL_CLIP == _kernel.CLIP
    assert pipeline._FINAL_CLIP == before


def test_the_public_dispatching_api_fails_the_kernel_count(capsys):
    """``atomic_ops.gdn2_forward_trainable`` off a TPU returns its pure-JAX chunked
    reference: it matches the op, and the harness fails it as a fallback, naming the pass
    and what ran instead of the kernels."""
    installed_or_skip()
    code = main(["repro", NAME, "--backend", "interpret", "--case", SMALL.to_json(),
                 "--impl", "atomic_ops:gdn2_forward_trainable"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "no Pallas kernel (fwd, bwd)" in out, out
    assert "the forward pass ran 0 Pallas kernel(s) (expected >= 3)" in out, out


@pytest.mark.nightly  # ~20 s per case in interpret mode
def test_the_pristine_kernel_passes_its_seed_cases():
    installed_or_skip()
    family, backend = get_family(NAME), resolve_backend("interpret")
    for case in family.seed_cases(frozenset()):
        result = check_case(family, case, backend)
        assert result.passed, [v.problems for v in result.verdicts]


@pytest.mark.nightly
def test_a_burst_of_strong_decay_then_weak_decay_in_one_chunk_fails():
    """The finding: two chunks of 128 in ordinary decay pass; with a burst of decay -30
    and then weak decay inside one chunk the float32 kernel errs past 5e-5."""
    installed_or_skip()
    family, backend = get_family(NAME), resolve_backend("interpret")
    case = Gdn2Case(dtype="float32", seed=3, batch=1, seq_len=256, chunk_size=128,
                    micro_block=16, qk_l2norm=False)
    assert check_case(family, case, backend).passed
    burst = dataclasses.replace(case, decay="burst", burst_strength=30.0)
    result = check_case(family, burst, backend)
    assert not result.passed
    assert max(v.stats.max_rel_err for v in result.verdicts) > 5e-5


@pytest.mark.nightly  # ~30 s: the exported script compiles the kernels in interpret mode
def test_the_exported_repro_runs_standalone_and_passes(tmp_path):
    """The first golden case as a standalone script (no kernel_harness importable): the
    library's kernel matches the embedded token-serial recurrence, exit 0."""
    installed_or_skip()
    done = export_and_run(NAME, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
