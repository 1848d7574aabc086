"""export-repro flash: the first golden case's script passes with kernel_harness hidden,
and a planted kernel (causal dropped) exported for the same case exits 1."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from kernel_harness.records.registry import get_family
from kernel_harness.regression.export import build_case, export_repro
from tests.helpers.standalone import run_standalone

ROOT = Path(__file__).resolve().parents[3]

PLANTED = '''
from jax.experimental.pallas.ops.tpu import flash_attention as fa

def flash(q, k, v, ab=None, segment_ids=None, *, causal, **kwargs):
    return fa.flash_attention(q, k, v, ab, segment_ids, causal=False, **kwargs)
'''


def _first_golden() -> str:
    cases = json.loads((ROOT / "golden" / "flash" / "cases.json").read_text())["cases"]
    return json.dumps(cases[0]["case"])


@pytest.mark.nightly  # one family's script; the mechanism runs per push (sdpa, hstu)
def test_first_golden_case_pristine_exits_0_planted_exits_1(tmp_path: Path) -> None:
    fam = get_family("flash")
    case = build_case(fam, _first_golden())
    assert case.is_causal
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / "planted_flash.py").write_text(textwrap.dedent(PLANTED))
    pristine, _ = export_repro(fam, case, tmp_path / "pristine.py")
    planted, _ = export_repro(fam, case, tmp_path / "planted.py", impl_spec="planted_flash:flash")
    good = run_standalone(pristine)
    assert good.returncode == 0, good.stdout + good.stderr
    assert good.stdout.count("ok  ") == 4  # out, dq, dk, dv (no bias: no dab)
    bad = run_standalone(planted, extra_path=kernels)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "FAIL out" in bad.stdout
