"""The export contract, once over the registry: every family with an ``export`` hook writes a
script whose reference is the harness's own, on the family's first golden case (the script
loaded in this process: its ``reference(x)`` against ``Family.reference``). Per-family
folders keep what is the family's own: its planted bug and the standalone run."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from kernel_harness.records.registry import BUILTIN_FAMILIES, get_family
from tests.helpers.golden_export import GOLDEN, golden_cases, reference_agrees
from tests.helpers.per_push import per_push

#: Largest |script reference - harness reference| / the output's scale: the script runs
#: the same source (the op's, embedded verbatim); what is left is eager against jitted
#: evaluation order (at most 2.4e-7 seen, on 2026-12-02, for the 12 families here).
BOUND = 1e-6


def _exported() -> list[str]:
    names = []
    for name in BUILTIN_FAMILIES:
        if name == "torch-sdpa" and importlib.util.find_spec("torch") is None:
            continue  # its tests need the [torch] extra (docs/torch.md)
        if get_family(name).export is not None:
            names.append(name)
    return names


def test_every_family_but_the_torch_one_is_exported_here():
    missing = [n for n in BUILTIN_FAMILIES if n not in _exported() and n != "torch-sdpa"]
    assert missing == []
    assert all((GOLDEN / n / "cases.json").exists() for n in _exported())


@pytest.mark.parametrize("family", per_push(_exported()))
def test_the_scripts_reference_is_the_harness_reference(family: str, tmp_path: Path) -> None:
    if not get_family(family).backends:  # runs where its jax has what the kernel needs
        pytest.skip(f"{family} has no backend on this stack ({get_family(family).requires}); "
                    "its own tests check the export where it runs")
    assert reference_agrees(family, tmp_path) <= BOUND


#: The families whose scripts embed the cache update and the attention over it (their first
#: golden case is float32 without quantization: every golden case reaches the fp8 paths).
KV_UPDATE = ("tpu-inference-rpa-v3", "tpu-inference-rpa-v3-hd64", "tpu-inference-mla-v2")


@pytest.mark.nightly  # one family's script; the mechanism runs per push (sdpa, hstu)
@pytest.mark.parametrize("family", KV_UPDATE)
def test_every_golden_case_of_a_kv_update_script_agrees(family: str, tmp_path: Path) -> None:
    if not get_family(family).backends:
        pytest.skip(f"{family} has no backend on this stack ({get_family(family).requires})")
    worst = {c.to_json(): reference_agrees(family, tmp_path, c) for c in golden_cases(family)}
    assert len(worst) >= 3 and max(worst.values()) <= BOUND, worst


#: How an export takes its op's reference: the op's functions' source, embedded verbatim.
EMBEDS = re.compile(r"\b(call_source|reference_source|getsource|ragged_reference_source|"
                    r"kv_update_reference_source|export_snippet)\(")


def test_no_export_hand_types_its_ops_reference() -> None:
    """Counted at 0 (issue 54): a script's reference is the op's source, never a retyped
    copy that could drift from the harness's (gpu-softmax, gpu-norm, megablox-gmm,
    tpu-all-gather and the all-gather matmul retyped theirs until 2026-12-05)."""
    families = Path(__file__).resolve().parents[2] / "kernel_harness" / "families"
    hand_typed = sorted(p.parent.name for p in families.glob("*/export.py")
                        if not EMBEDS.search(p.read_text()))
    assert hand_typed == []
