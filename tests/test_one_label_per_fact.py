"""One fact, one label (issue 54): no family emits a label the attention op renamed
(``ops/attention/events.RENAMED``: rows that see no key are ``rows-without-keys``, a dtype
is its name, ...), a family on the attention problem labels the problem's facts only with
the op's label set, and the logit-scale label is built in one place.

Fact sites still written more than once are ratcheted: their count may only fall."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from kernel_harness.ops.attention.events import RENAMED, RENAMED_IN
from kernel_harness.ops.attention.record import LABELS
from kernel_harness.records.registry import family_names, get_family

PACKAGE = Path(__file__).resolve().parents[1] / "kernel_harness"
#: The kernel's own configuration labels of the families on the attention problem.
CONFIG_LABELS = {
    "torch-sdpa": re.compile(r"kernel-(math|flash)"),
    # flash's block paths, and its grids over batch rows and heads, unmasked or not
    "flash": re.compile(r"fwd-.*|(multi|ragged)-q-block|d(kv|q)-(subtiles|multi-block)|"
                        r"block_b.*|partial-batch-block|batch>1|heads>1|non-causal"),
    # splash's blocks, how it holds its masks, its layouts, its MQA kernel, runtime skips
    "splash": re.compile(r"multi-(q|kv)-block|d?kv-compute<d?kv-block|bwd-blocks-differ|"
                         r"mask-(function|blocks)|fused-bwd|seq-minor-layout|mqa-kernel|"
                         r"head-dim!=128|batch>1|partial-blocks|skipped-blocks|runtime-skip:.*"),
}


def _labels(name: str, examples: int = 15) -> set[str]:
    family = get_family(name)
    seen: set[str] = set()
    for case in family.seed_cases(frozenset()):
        seen.update(family.events(case))

    @settings(max_examples=examples, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(family.cases())
    def collect(case) -> None:
        seen.update(family.events(case))

    collect()
    return seen


@pytest.mark.parametrize("name", family_names())
def test_no_family_emits_a_renamed_label(name: str) -> None:
    family = get_family(name)
    renamed = {**RENAMED, **RENAMED_IN.get(name, {})}
    old = (set(renamed) | {"q-len-ne-kv-len"}) & (set(_labels(name)) | set(family.modes))
    assert not old, f"{name} still says {sorted(old)}: the op's labels are " \
                    f"{sorted(renamed[o] for o in old if o in renamed)}"


@pytest.mark.parametrize("name", ["sdpa", "torch-sdpa", "flash", "splash"])
def test_a_family_on_the_problem_labels_its_facts_with_the_ops_labels(name: str) -> None:
    config = CONFIG_LABELS.get(name)
    own = {label for label in _labels(name, 30) if not label.startswith("logits-")
           and not (config and config.fullmatch(label))}
    assert own <= LABELS, sorted(own - LABELS)


def _sites(pattern: str) -> list[str]:
    regex = re.compile(pattern)
    return sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                  if regex.search(p.read_text()))


def test_the_logits_label_is_built_once() -> None:
    assert _sites(r"f\"logits-\{") == ["ops/attention/events.py"]


ATTENTION = ("ops/attention/", "families/splash/", "families/flash/", "families/sdpa/",
             "families/torch_sdpa/", "families/gpu_mha/", "families/gpu_decode/")


@pytest.mark.parametrize(("fact", "pattern", "at_most"), [
    # each written once, in the op (Features.calibrated, features.OPTIONAL)
    ("calibrated dtypes", r"^CALIBRATED_DTYPES\b", 0),
    ("the attention problem's optional features", r"^OPTIONAL\b.*=", 1),
    # the op's and splash's segment layouts: ops/attention/segment_draws.py
    ("segment drawers", r"^def \w*runs\w*\(draw", 1),
    # the data field "q drawn so that the logits are N(0, s^2)": the problem's
    ("logit_scale declarations", r"^\s+logit_scale: float\b", 1),
    # the one exclusion rule (rows outside the contract), from which valid,
    # may_be_nonfinite and constrain derive (ops/attention/problem_hooks.py)
    ("statements of the exclusion", r"^\s+def rows_outside\(", 1),
])
def test_facts_still_written_twice_do_not_spread(fact: str, pattern: str, at_most: int) -> None:
    sites = [s for s in _sites(f"(?m){pattern}") if s.startswith(ATTENTION)]
    assert len(sites) <= at_most, f"{fact} written in {len(sites)} places: {sites}"
