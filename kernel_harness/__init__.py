"""kernel-harness: a correctness harness for JAX Pallas attention kernels.

The public API is re-exported here but imported on first use (module
``__getattr__``): ``import kernel_harness`` (and so the pytest plugin, which
lives in this package) loads neither jax nor the harness, while
``from kernel_harness import check_case`` works as usual.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "BACKEND_NAMES": "kernel_harness.core.backends",
    "Backend": "kernel_harness.core.backends",
    "BackendUnavailable": "kernel_harness.core.backends",
    "availability": "kernel_harness.core.backends",
    "resolve_backend": "kernel_harness.core.backends",
    "current_backend": "kernel_harness.core.backends",
    "Case": "kernel_harness.core.case",
    "OutputStats": "kernel_harness.core.compare",
    "compare": "kernel_harness.core.compare",
    "Calibrated": "kernel_harness.core.tolerance",
    "SliceFloor": "kernel_harness.core.tolerance",
    "Tolerance": "kernel_harness.core.tolerance",
    "ToleranceTable": "kernel_harness.core.tolerance",
    "Verdict": "kernel_harness.core.tolerance",
    "judge": "kernel_harness.core.tolerance",
    "standard_floor": "kernel_harness.core.tolerance",
    "JudgedOutput": "kernel_harness.core.judges",
    "judge_output": "kernel_harness.core.judges",
    "judged_outputs": "kernel_harness.records.outputs",
    "CaseResult": "kernel_harness.run.runner",
    "check_case": "kernel_harness.run.runner",
    "Adapter": "kernel_harness.records.adapter",
    "JittedTpuProgram": "kernel_harness.records.adapter",
    "traced_run": "kernel_harness.records.adapter",
    "Family": "kernel_harness.records.family",
    "UnknownFamily": "kernel_harness.records.registry",
    "family_names": "kernel_harness.records.registry",
    "get_family": "kernel_harness.records.registry",
    "without": "kernel_harness.records.narrow",
    "KernelExpectation": "kernel_harness.records.kernels",
    "OutsideKernel": "kernel_harness.records.outside",
    "fallback": "kernel_harness.records.kernels",
    "Metamorphic": "kernel_harness.records.hooks",
    "Toggle": "kernel_harness.records.hooks",
    "toggles": "kernel_harness.records.hooks",
    "Relation": "kernel_harness.records.relations",
    "Variant": "kernel_harness.records.relations",
    "Mutant": "kernel_harness.records.mutant",
    "edits_of": "kernel_harness.records.mutant",
    "ExportSnippet": "kernel_harness.records.export",
    "BadInput": "kernel_harness.records.bad_input",
    "block_variants": "kernel_harness.records.blocks",
    "block_aware_sizes": "kernel_harness.ops.sizes",
    "block_events": "kernel_harness.ops.sizes",
    "Operand": "kernel_harness.ops.rowwise",
    "RowwiseCase": "kernel_harness.ops.rowwise",
    "half": "kernel_harness.ops.rowwise",
    "rowwise_cases": "kernel_harness.ops.rowwise",
    "rowwise_family": "kernel_harness.ops.rowwise",
    "AttentionProblem": "kernel_harness.ops.attention.problem",
    "Features": "kernel_harness.ops.attention.features",
    "problem_record": "kernel_harness.ops.attention.record",
    "ATTENTION_CALIBRATED": "kernel_harness.ops.attention.tolerance",
    # The delta-rule (chunked linear attention) op: a user's own recurrence kernel's case,
    # strategy, events, chunk-size block variants, reference, relations and GQA-as-MHA.
    "DeltaRuleCase": "kernel_harness.ops.delta_rule.cases",
    "delta_rule_cases": "kernel_harness.ops.delta_rule.strategy",
    "delta_rule_events": "kernel_harness.ops.delta_rule.strategy",
    "chunk_variants": "kernel_harness.ops.delta_rule.strategy",
    "delta_rule_reference": "kernel_harness.ops.delta_rule.reference",
    "DELTA_RULE_RELATIONS": "kernel_harness.ops.delta_rule.relations",
    "SERVING_RELATIONS": "kernel_harness.ops.delta_rule.serving_relations",
    "delta_rule_as_mha": "kernel_harness.ops.delta_rule.relations",
    "Bench": "kernel_harness.records.bench",
    "Timed": "kernel_harness.records.bench",
    "ShrinkBudget": "kernel_harness.run.profiles",
    "CheckRequest": "kernel_harness.orchestration.request",
    "CheckSession": "kernel_harness.orchestration.session",
    "SessionResult": "kernel_harness.orchestration.session",
    "UnitResult": "kernel_harness.orchestration.session",
    "BenchRow": "kernel_harness.checks.bench",
    "BenchSettings": "kernel_harness.checks.bench",
    "bench_family": "kernel_harness.checks.bench",
    # The kernel pulls in Pallas, and `kernel-harness mutate` must be able to plant a bug
    # in the hstu modules before anything imports them.
    "hstu_attention": "kernel_harness.kernels.hstu.api",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kernel_harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
