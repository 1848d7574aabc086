"""A worker sends its UnitResult as JSON without the in-process outcome; building that JSON
must not copy the outcome (dataclasses.asdict deep-copied it, and a HarnessFailure in it
cannot be rebuilt from its message: every failing matches-reference under the worker was
reported as a CRASH)."""

from __future__ import annotations

from kernel_harness.orchestration.units import UnitResult


class _Uncopyable:
    def __deepcopy__(self, memo):
        raise AssertionError("the outcome was deep-copied")


def test_to_json_dict_leaves_the_outcome_alone():
    result = UnitResult(family="toy", prop="matches-reference", backend="interpret",
                        verdict="FAIL", record={"n": [1, 2]}, text="t", outcome=_Uncopyable())
    d = result.to_json_dict()
    assert d["outcome"] is None and d["verdict"] == "FAIL" and d["record"] == {"n": [1, 2]}
