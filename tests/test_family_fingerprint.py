"""scripts/family_fingerprint.py: the before/after record a refactor is compared by."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

from kernel_harness.records.registry import get_family

_SPEC = importlib.util.spec_from_file_location(
    "family_fingerprint", Path(__file__).parents[1] / "scripts" / "family_fingerprint.py")
fingerprint = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(fingerprint)


def test_canonical_form_ignores_set_order_and_addresses() -> None:
    canonical = fingerprint.canonical
    assert canonical(frozenset({"b", "a"})) == canonical(frozenset({"a", "b"})) == "{'a', 'b'}"
    assert canonical({"y": 1, "x": (2, 3)}) == "{'x': (2, 3), 'y': 1}"
    assert canonical(lambda: 0) == "<callable>"
    assert " at 0x" not in canonical(object())


def test_a_changed_record_or_reference_changes_the_fingerprint() -> None:
    family = get_family("gpu-softmax")
    lines = fingerprint.fingerprint(family)
    assert fingerprint.fingerprint(family) == lines  # derandomized: the same draws again
    assert sum(line.startswith("drawn ") for line in lines) == 8
    assert any(line.startswith("reference ") for line in lines)
    renamed = dataclasses.replace(family, summary=family.summary + "!")
    assert fingerprint.fingerprint(renamed) != lines

    def reference(case, inputs):  # noqa: ANN001, ANN202 - the family's signature
        return {k: v * 1.001 for k, v in family.reference(case, inputs).items()}

    changed = fingerprint.fingerprint(dataclasses.replace(family, reference=reference))
    assert [a for a in changed if a.startswith("reference ")] != [
        a for a in lines if a.startswith("reference ")]
