"""export-repro hstu: the script carries our kernel's own source, so the first golden
case's script passes with kernel_harness hidden; the same kernel with a planted bug
(a catalog mutant applied to the carried source) writes a script that exits 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel_harness.families.hstu import export as hstu_export
from kernel_harness.families.hstu.mutants import MUTANTS
from kernel_harness.records.mutant import apply
from kernel_harness.records.registry import get_family
from kernel_harness.regression.export import build_case, export_repro
from tests.helpers.standalone import run_standalone

ROOT = Path(__file__).resolve().parents[3]
#: The backward kernel forgetting the segment mask: the first golden case has segments.
BUG = "bwd-ignores-segments"


def _first_golden() -> str:
    cases = json.loads((ROOT / "golden" / "hstu" / "cases.json").read_text())["cases"]
    return json.dumps(cases[0]["case"])


def _buggy_package(tmp_path: Path) -> Path:
    """The carried kernel source with the mutant applied, as an importable package."""
    (mutant,) = [m for m in MUTANTS if m.name == BUG]
    module = mutant.module.rpartition(".")[2]
    root = tmp_path / "kernels"
    (root / "hstu_kernel").mkdir(parents=True)
    (root / "hstu_kernel" / "__init__.py").write_text("")
    for name, source in hstu_export.kernel_sources().items():
        text = apply(mutant, source) if name == module else source
        (root / "hstu_kernel" / f"{name}.py").write_text(text)
    return root


def test_the_carried_source_imports_no_harness() -> None:
    for name, source in hstu_export.kernel_sources().items():
        assert "kernel_harness" not in source, name


@pytest.mark.parametrize("planted", [False, True], ids=["pristine", "planted"])
def test_first_golden_case_script(tmp_path: Path, planted: bool) -> None:
    fam = get_family("hstu")
    case = build_case(fam, _first_golden())
    assert case.q_segments is not None
    impl = "hstu_kernel.api:hstu_attention" if planted else None
    script, _ = export_repro(fam, case, tmp_path / "repro.py", impl_spec=impl)
    res = run_standalone(script, extra_path=_buggy_package(tmp_path) if planted else None)
    if planted:
        assert res.returncode == 1, res.stdout + res.stderr
        assert "ok   out" in res.stdout  # the forward is untouched
        assert any(ln.startswith(("FAIL dq", "FAIL dk", "FAIL dv"))
                   for ln in res.stdout.splitlines())
    else:
        assert res.returncode == 0, res.stdout + res.stderr
        assert res.stdout.count("ok  ") == 4
