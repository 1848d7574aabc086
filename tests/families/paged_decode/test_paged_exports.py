"""export-repro of the decode families: the script for the first golden case (tpu-paged,
without goldens: its first seed case and its megacore int8 seed case) exits 0 with
kernel_harness not importable, and 1 for a planted kernel (a 1% too large output)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from kernel_harness.records.registry import get_family
from kernel_harness.regression.export import build_case, export_repro
from tests.helpers.standalone import run_standalone

ROOT = Path(__file__).resolve().parents[3]


def first_golden(family: str) -> str:
    cases = json.loads((ROOT / "golden" / family / "cases.json").read_text())
    first = cases["cases"][0] if isinstance(cases, dict) else cases[0]
    return json.dumps(first["case"]) if isinstance(first["case"], dict) else first["case"]


def tpu_paged_seed(i: int) -> str:
    return get_family("tpu-paged").seed_cases(frozenset())[i].to_json()


CASES = {
    "gpu-decode": lambda: first_golden("gpu-decode"),
    "gpu-paged": lambda: first_golden("gpu-paged"),
    "tpu-paged": lambda: tpu_paged_seed(0),
    "tpu-paged-megacore-int8": lambda: tpu_paged_seed(1),
}

PLANTED = {
    "gpu-paged": '''
        from jax.experimental.pallas.ops.gpu.paged_attention import paged_attention

        def kernel(*args, **kwargs):
            return paged_attention(*args, **kwargs) * 1.01
    ''',
    "tpu-paged": '''
        from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention

        def kernel(*args, **kwargs):
            return paged_attention(*args, **kwargs) * 1.01
    ''',
}


@pytest.mark.nightly  # one family's script; the mechanism runs per push (sdpa, hstu)
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_script_passes_without_the_harness(name, tmp_path):
    family = get_family(name.removesuffix("-megacore-int8"))
    case = build_case(family, CASES[name]())
    script, _ = export_repro(family, case, tmp_path / "repro.py")
    res = run_standalone(script)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ok   out" in res.stdout


@pytest.mark.nightly  # one family's script; the mechanism runs per push (sdpa, hstu)
@pytest.mark.parametrize("name", sorted(PLANTED))
def test_a_planted_kernel_fails_the_script(name, tmp_path):
    family = get_family(name)
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / "planted.py").write_text(textwrap.dedent(PLANTED[name]))
    case = build_case(family, CASES[name]())
    script, _ = export_repro(family, case, tmp_path / "repro.py", impl_spec="planted:kernel")
    res = run_standalone(script, extra_path=kernels)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "FAIL out" in res.stdout
