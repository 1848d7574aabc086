"""Fingerprint every registered family, to show that a refactor changed nothing a user sees.

For each family: every data field of its ``Family`` record (callables as ``<callable>``,
sets sorted, addresses dropped), its case type's fields in order, its seed cases and 8
derandomized drawn cases (as they print) with their events (old labels through the op's
rename maps, ``ops/attention/events.RENAMED`` and ``RENAMED_IN``), ``not_compared`` and ``valid``
masks (hashed), and the inputs, reference outputs and exported script of its first three
seed cases and first two drawn cases (hashed). Not covered: what callables do beyond these,
``describe`` and mutant catalogs (diff ``kernel-harness describe`` and ``mutate --list``).
One file per family in OUTDIR::

    XLA_FLAGS=--xla_force_host_platform_device_count=8 python scripts/family_fingerprint.py before/
    # ... the change ...
    XLA_FLAGS=--xla_force_host_platform_device_count=8 python scripts/family_fingerprint.py after/
    diff -r before after

Fingerprint all families in both runs: Hypothesis's derandomized draws depend on what ran
before in the same process, so a run over a subset draws other cases.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, given, seed, settings

from kernel_harness.ops.attention import events as _events
from kernel_harness.records.family import Family
from kernel_harness.records.registry import family_names, get_family


def digest(a: Any) -> str:
    """dtype, shape and a short hash of an array's bytes (bfloat16 compared as float32)."""
    a = np.asarray(a)
    if str(a.dtype) == "bfloat16":
        a = a.astype(np.float32)
    return f"{a.dtype}{a.shape}:{hashlib.sha1(np.ascontiguousarray(a).tobytes()).hexdigest()[:12]}"


def canonical(v: Any) -> str:
    """A repr that does not depend on set order or object addresses."""
    if isinstance(v, (frozenset, set)):
        return "{" + ", ".join(sorted(canonical(x) for x in v)) + "}"
    if isinstance(v, dict):
        items = sorted(v.items(), key=lambda kv: repr(kv[0]))
        return "{" + ", ".join(f"{canonical(k)}: {canonical(x)}" for k, x in items) + "}"
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(canonical(x) for x in v) + ")"
    if isinstance(v, type):
        return v.__qualname__
    if callable(v):
        return "<callable>"
    if dataclasses.is_dataclass(v):
        return type(v).__name__ + canonical(
            {f.name: getattr(v, f.name) for f in dataclasses.fields(v)})
    return re.sub(r" at 0x[0-9a-f]+", "", repr(v))


def drawn(family: Family, n: int = 8) -> list[Any]:
    """The first ``n`` cases the family's strategy draws, derandomized."""
    got: list[Any] = []

    @seed(1234)
    @settings(max_examples=n, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    @given(family.cases())
    def collect(case: Any) -> None:
        got.append(case)

    collect()
    return got


def fingerprint(family: Family) -> list[str]:
    """The lines of one family's fingerprint."""
    lines = [f"field {f.name}: {canonical(getattr(family, f.name))}"
             for f in dataclasses.fields(family)]
    fields = dataclasses.fields(family.case_type)
    lines.append("case fields " + ", ".join(f.name for f in fields))
    renamed = {**_events.RENAMED, **getattr(_events, "RENAMED_IN", {}).get(family.name, {})}
    seeds, draws = list(family.seed_cases(frozenset())), drawn(family)
    for kind, case in [("seed", c) for c in seeds] + [("drawn", c) for c in draws]:
        lines.append(f"{kind} {case!r}")
        lines.append(f"  events {sorted({renamed.get(e, e) for e in family.events(case)})}")
        lines.append(f"  not_compared {canonical(dict(family.not_compared(case)))}")
        valid = family.valid(case)
        lines.append("  valid " + ", ".join(f"{k}={digest(v)}" for k, v in sorted(valid.items())))
    for case in seeds[:3] + draws[:2]:
        inputs = case.materialize()
        lines.append("inputs " + ", ".join(f"{k}={digest(v)}" for k, v in sorted(inputs.items())))
        ref = family.reference(case, inputs)
        lines.append("reference " + ", ".join(f"{k}={digest(v)}" for k, v in sorted(ref.items())))
        if family.export is not None:
            script = repr(family.export(case)).encode()
            lines.append(f"export {hashlib.sha1(script).hexdigest()[:12]}")
    return lines


def main(argv: list[str]) -> int:
    """Writes OUTDIR/<family>.fp for the named families (default: all)."""
    if not argv:
        print(__doc__)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for name in argv[1:] or family_names():
        try:
            lines = fingerprint(get_family(name))
        except ImportError as e:  # a family whose library is not installed here
            lines = [f"unavailable: {e}"]
        (out / f"{name}.fp").write_text("\n".join(lines) + "\n")
        print(name, len(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
