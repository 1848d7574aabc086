"""flywheel-tpu-gdn and flywheel-tpu-kda get the delta-rule serving form's state-continuity
relation from the op (ops/delta_rule/serving_relations.py): it holds on the kernels, its
variant runs the program compiled for the drawn case (the families' fixed 192-row shapes),
and it kills the bugs planted in a continued sequence's state load
(tests/families/flywheel_tpu_gdn/state_mutants.py), nightly."""

from __future__ import annotations

import dataclasses

import jax
import pytest

from kernel_harness.checks.metamorphic.repro import replay
from kernel_harness.core.backends import resolve_backend
from kernel_harness.ops.delta_rule.serving_relations import (
    SERVING_RELATIONS,
    state_continuity,
)
from kernel_harness.records.registry import get_family
from kernel_harness.run.runner import run_counted
from tests.families.flywheel_tpu_gdn import state_mutants
from tests.helpers.libraries import flywheel_installed_or_skip

FAMILIES = ("flywheel-tpu-gdn", "flywheel-tpu-kda")
#: The second of the sequences it may split (a decode never is): the 20-token fresh one,
#: split at its token 8.
DRAWS = '[{"label":"sequence","index":0},{"label":"split token","value":8}]'
#: jax's event of a program lowered (even where the persistent compile cache then has it
#: compiled: jax._src.dispatch.JAXPR_TO_MLIR_MODULE_EVENT).
LOWERED = "/jax/core/compile/jaxpr_to_mlir_module_duration"
#: The kernel's interpreted program lowers in ~2 s (2026-12-06, this machine); an eager op
#: that jax's op cache happens to lower again (unstack, swapaxes) in ~0.01 s.
PROGRAM_LOWERING_S = 0.5


def _case(name):
    """The family's seed case with a 20-token fresh sequence (fewer interpreted rows)."""
    seed = get_family(name).seed_cases(frozenset())[0]
    return dataclasses.replace(seed, lengths=(1, 1, 20, 2), histories=(9, 3, 0, 5))


@pytest.mark.parametrize("name", FAMILIES)
def test_the_families_take_the_op_s_relation(name):
    assert get_family(name).relation("state-continuity") is SERVING_RELATIONS[0]


@pytest.mark.parametrize("name", FAMILIES)
def test_the_relation_holds_and_its_variant_compiles_nothing(name):
    flywheel_installed_or_skip()
    family, backend = get_family(name), resolve_backend("interpret")
    case = _case(name)
    inputs = case.materialize()
    run_counted(family, family.kernel, case, inputs, backend)
    answers = iter((2, 8))  # the sequence, the split token: DRAWS
    variant = state_continuity(case, inputs, lambda strategy, label="": next(answers))
    assert variant.case.lengths[2] == 12 and variant.case.histories[2] == 8
    lowered = []

    def listener(event, duration, **kwargs):
        if event == LOWERED and duration >= PROGRAM_LOWERING_S:
            lowered.append(kwargs.get("fun_name"))

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        run_counted(family, family.kernel, variant.case, variant.inputs, backend)
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert not lowered, f"the variant lowered a new program: {lowered}"
    check = replay(family, "state-continuity", case, backend, DRAWS)
    assert not check.problems and check.runs == 2


@pytest.mark.slow
@pytest.mark.nightly
def test_the_relation_kills_a_kernel_that_skips_a_continued_sequence_s_state():
    """Each planted bug, state-continuity alone (no reference), a few examples: killed."""
    flywheel_installed_or_skip()
    from kernel_harness.regression import mutate

    chosen = {"flywheel-tpu-gdn": state_mutants.GDN, "flywheel-tpu-kda": state_mutants.KDA}
    results = mutate.run_families(chosen, properties=["state-continuity"], max_examples=8,
                                  golden=False, timeout=600)
    for name, mutants in chosen.items():
        assert [r.mutant for r in results[name]] == [m.name for m in mutants]
        assert all(r.status == "KILLED" for r in results[name]), mutate.kill_matrix(
            results[name], ["state-continuity"])
