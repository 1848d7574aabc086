"""Exporting a family's first golden case as a standalone script and running it where
kernel_harness cannot be imported (the export tests under tests/families/)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np

import kernel_harness
from kernel_harness.records.registry import get_family
from kernel_harness.regression.export import build_case, export_repro
from tests.helpers.standalone import run_standalone

GOLDEN = Path(kernel_harness.__file__).parent / "_golden_data"


def golden_cases(family: str) -> list[object]:
    """Every case of ``family``'s golden store, in its order."""
    data = json.loads((GOLDEN / family / "cases.json").read_text())
    return [build_case(get_family(family), json.dumps(c["case"])) for c in data["cases"]]


def first_golden_case(family: str) -> object:
    """The first case of ``family``'s golden store."""
    return golden_cases(family)[0]


def export_and_run(family: str, tmp: Path, *, impl_spec: str | None = None,
                   extra_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Exports the first golden case (for ``impl_spec`` if given) and runs the script."""
    script, _ = export_repro(get_family(family), first_golden_case(family),
                             tmp / f"{family.replace('-', '_')}.py", impl_spec=impl_spec)
    return run_standalone(script, extra_path=extra_path)


def reference_agrees(family: str, tmp: Path, case: object | None = None) -> float:
    """Largest |script reference - harness reference| / scale over the compared outputs, on
    ``case`` (default: the first golden case)."""
    import importlib.util

    fam = get_family(family)
    case = first_golden_case(family) if case is None else case
    script, _ = export_repro(fam, case, tmp / "ref_check.py")
    spec = importlib.util.spec_from_file_location("ref_check", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x, _ = module.load_inputs()
    theirs, ours = module.reference(x), fam.reference(case, case.materialize())
    worst = 0.0
    for name in module.TOL:
        scale = max(float(np.max(np.abs(ours[name]))), 1e-30)
        worst = max(worst, float(np.max(np.abs(np.asarray(theirs[name]) - ours[name]))) / scale)
    return worst


def export_and_run_planted(family: str, tmp: Path, source: str,
                           module: str) -> subprocess.CompletedProcess[str]:
    """Writes ``source`` as module ``module`` (its ``kernel`` the impl), exports the first
    golden case for it and runs the script with that module importable."""
    kernels = tmp / "kernels"
    kernels.mkdir(exist_ok=True)
    (kernels / f"{module}.py").write_text(source)
    return export_and_run(family, tmp, impl_spec=f"{module}:kernel", extra_path=kernels)
