"""deltanet-tpu's chunk_gdn2 (issue 57): without the library the family says what to install;
with it (Python >= 3.12 only: the library's own requirement) the pristine kernel passes its
seed cases, fails the burst decay regime (findings/deltanet-tpu-gdn2-fp32-burst-decay-
precision/), and planted bugs are seen. (The op: tests/ops/test_delta_rule.py.)"""

from __future__ import annotations

import dataclasses

import pytest

from kernel_harness.core.backends import BackendUnavailable, resolve_backend
from kernel_harness.families.deltanet_gdn2 import kernel as _kernel
from kernel_harness.families.deltanet_gdn2.mutants import MUTANTS
from kernel_harness.records.mutant import load_patched, patched_source
from kernel_harness.records.registry import get_family
from kernel_harness.run.runner import check_case
from tests.helpers.libraries import deltanet_installed_or_skip

NAME = "deltanet-tpu-gdn2"


def test_without_the_library_the_family_says_what_to_install():
    """`list` shows ``requires`` where there is no backend; `check` says it too."""
    family = get_family(NAME)
    assert "Python >= 3.12" in family.requires and "--no-deps" in family.requires
    assert bool(family.backends) == _kernel.available()
    if not _kernel.available():
        case = family.seed_cases(frozenset())[0]
        with pytest.raises(BackendUnavailable, match=r"none here \(needs deltanet-tpu"):
            check_case(family, case, resolve_backend("interpret"))


def test_every_mutant_applies_to_the_installed_source():
    deltanet_installed_or_skip()
    for mutant in MUTANTS:
        patched_source(mutant)


@pytest.mark.nightly  # ~10 s per case in interpret mode
def test_the_pristine_kernel_passes_its_seed_cases():
    deltanet_installed_or_skip()
    family, backend = get_family(NAME), resolve_backend("interpret")
    for case in family.seed_cases(frozenset()):
        result = check_case(family, case, backend)
        assert result.passed, [v.problems for v in result.verdicts]


@pytest.mark.nightly
def test_a_burst_of_strong_decay_then_weak_decay_in_one_chunk_fails():
    """The finding: the same case in ordinary decay passes; with a burst of decay -30 and
    then weak decay inside one chunk the fp32 kernel errs well past 1e-5."""
    deltanet_installed_or_skip()
    family, backend = get_family(NAME), resolve_backend("interpret")
    case = family.seed_cases(frozenset())[1]
    burst = dataclasses.replace(case, decay="burst", burst_strength=30.0, zero_chunk=None)
    result = check_case(family, burst, backend)
    assert not result.passed
    assert max(v.stats.max_rel_err for v in result.verdicts) > 5e-5


@pytest.mark.nightly
@pytest.mark.parametrize("name", ["initial-state-ignored", "decay-gradient-dropped"])
def test_a_planted_bug_is_seen(name):
    """The mutated module's chunk_gdn2 as the implementation (a function of its own, so no
    program compiled for the pristine one is reused). With ordinary decay (e^-0.37 per
    token) the carried state is ~e^-50 after a chunk and dropping its share of dg is below
    the tolerance; the golden cases and this weak-decay case see it."""
    deltanet_installed_or_skip()
    family, backend = get_family(NAME), resolve_backend("interpret")
    patched = load_patched(next(m for m in MUTANTS if m.name == name))

    def impl(q, k, v, g, b, w, h0, *, segment_ids, chunk_size, qk_l2norm):
        return patched.chunk_gdn2(q, k, v, g, b, w, segment_ids=segment_ids,
                                  initial_state=h0, output_final_state=True,
                                  chunk_size=chunk_size, precision="fp32",
                                  qk_l2norm=qk_l2norm)

    # Weak decay: the state carried across the chunk edge (and its share of dg) matters.
    case = dataclasses.replace(family.seed_cases(frozenset())[0], decay="weak")
    result = check_case(family, case, backend, impl)
    assert not result.passed


def test_the_bf16_family_is_the_same_op_in_the_default_precision():
    fp32, bf16 = get_family(NAME), get_family(f"{NAME}-bf16")
    assert bf16.kernel is _kernel.chunk_gdn2_bf16 and fp32.kernel is _kernel.chunk_gdn2
    assert bf16.reference is fp32.reference and bf16.relations == fp32.relations
    assert 'precision="bf16"' in bf16.contract
    assert all(t.max_rel_err == 3e-2 for t in bf16.tolerances.entries.values())
    assert all(t.max_rel_err == 2e-5 for t in fp32.tolerances.entries.values())


@pytest.mark.nightly  # ~10 s per case in interpret mode
def test_in_bf16_the_burst_stays_within_bfloat16_noise():
    """The fp32 finding is below bfloat16's rounding: the bf16 family passes the burst."""
    deltanet_installed_or_skip()
    family, backend = get_family(f"{NAME}-bf16"), resolve_backend("interpret")
    case = dataclasses.replace(family.seed_cases(frozenset())[1], decay="burst",
                               burst_strength=150.0, zero_chunk=None)
    result = check_case(family, case, backend)
    assert result.passed, [v.problems for v in result.verdicts]
