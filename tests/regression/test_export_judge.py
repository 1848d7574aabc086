"""The exported script judges with the harness's own judge, not a copy of it.

``export-repro`` embeds :mod:`kernel_harness.core.compare` verbatim; these tests load an
exported script (without running its kernel) and hand its ``judge_output`` and the
library's :func:`~kernel_harness.run.runner.judge_outputs` the same planted arrays: the
verdicts and the problems they name must be identical, output by output.
"""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import numpy as np
import pytest

from kernel_harness.core import compare as compare_module
from kernel_harness.records.registry import get_family
from kernel_harness.regression.export import build_case, export_repro, judge_source
from kernel_harness.run.runner import judge_outputs

SDPA_CASE = ('{"dtype":"float32","seed":2,"batch":2,"q_len":16,"kv_len":24,"heads":4,'
             '"kv_heads":2,"head_dim":16,"is_causal":true,"bias":"head-shared",'
             '"mask":"full","q_lengths":[16,12],"kv_lengths":[24,20]}')
SPLASH_CASE = ('{"dtype":"float32","seed":6,"num_q_heads":4,"q_len":128,"kv_len":128,'
               '"masks":["causal(offset=0)","causal(offset=0)","causal(offset=0)",'
               '"causal(offset=0)"],"sinks":true}')


def _load(script: Path):
    spec = importlib.util.spec_from_file_location(f"exported_{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _planted(expected: dict[str, np.ndarray], output: str) -> dict[str, dict[str, np.ndarray]]:
    """Kernel outputs: pristine, and ``output`` wrong globally, in one small slice, by a
    NaN, and by one element far off."""
    ref = {k: np.asarray(v, np.float32) for k, v in expected.items() if ":" not in k}

    def with_(edit) -> dict[str, np.ndarray]:
        out = {k: v.copy() for k, v in ref.items()}
        out[output] = edit(out[output].copy())
        return out

    def smallest_slice(a: np.ndarray) -> np.ndarray:
        flat = np.abs(a).reshape(a.shape[0], -1) if a.ndim > 1 else np.abs(a)[:, None]
        i = int(np.argmin(np.where(flat.max(axis=1) > 0, flat.max(axis=1), np.inf)))
        a[i] *= 1.01
        return a

    def one_nan(a: np.ndarray) -> np.ndarray:
        a.flat[a.size // 2] = np.nan
        return a

    def one_far(a: np.ndarray) -> np.ndarray:
        a.flat[a.size // 3] += 0.5 * float(np.max(np.abs(a)))
        return a

    return {"pristine": with_(lambda a: a), "global-1pct": with_(lambda a: a * 1.01),
            "tiny": with_(lambda a: a * (1 + 3e-5)), "smallest-slice-1pct": with_(smallest_slice),
            "nan": with_(one_nan), "one-far": with_(one_far)}


@pytest.mark.parametrize(("family", "case_json", "planted_output"),
                         [("sdpa", SDPA_CASE, "dq"), ("sdpa", SDPA_CASE, "out"),
                          ("splash", SPLASH_CASE, "dsinks")])
def test_exported_judge_and_library_judge_agree(
    tmp_path: Path, family: str, case_json: str, planted_output: str
) -> None:
    fam = get_family(family)
    case = build_case(fam, case_json)
    script, _ = export_repro(fam, case, tmp_path / f"{family}.py")
    module = _load(script)
    _, valid = module.load_inputs()
    expected = fam.reference(case, case.materialize())
    verdict_kinds = set()
    for label, actual in _planted(expected, planted_output).items():
        ours, _ = judge_outputs(fam, case, {**actual, **{k: actual["out"] for k in fam.same_as}},
                                expected)
        by_name = {v.stats.output: v for v in ours}
        for name in module.TOL:
            stats, problems = module.judge_output(name, actual, expected, valid)
            v = by_name[name]
            assert (not problems) == v.passed, (label, name, problems, v.problems)
            assert tuple(problems) == v.problems, (label, name)
            assert stats.slice_rel_err == pytest.approx(v.stats.slice_rel_err), (label, name)
        verdict_kinds.add((label, by_name[planted_output].passed))
    # The planted arrays really exercise both verdicts (a pass and each kind of failure).
    assert ("pristine", True) in verdict_kinds and ("tiny", True) in verdict_kinds
    assert {("global-1pct", False), ("nan", False), ("one-far", False)} <= verdict_kinds


def test_the_embedded_judge_is_the_library_module_verbatim(tmp_path: Path) -> None:
    fam = get_family("sdpa")
    script, _ = export_repro(fam, build_case(fam, SDPA_CASE), tmp_path / "sdpa.py")
    text = script.read_text()
    body = inspect.getsource(compare_module).replace(
        "from __future__ import annotations\n", "", 1).strip()
    assert body in text and judge_source() in text
    assert "from __future__" not in text
    # Standalone: the embedded module imports nothing of the harness.
    assert "kernel_harness" not in "\n".join(
        ln for ln in body.splitlines() if ln.startswith(("import ", "from ")))
