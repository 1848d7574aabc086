"""export-repro: standalone scripts that run without kernel_harness and judge for themselves.

The acceptance test: for the same case, a script exported for a planted failing kernel
exits 1 and one for the pristine kernel exits 0, each run in a clean interpreter where
kernel_harness cannot be imported (:mod:`tests.helpers.standalone`).
"""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import numpy as np
import pytest

from kernel_harness.cli import main
from kernel_harness.ops.attention.export import op_source
from kernel_harness.records.registry import get_family
from kernel_harness.regression.export import ExportError, build_case, export_repro, judge_source
from tests.helpers.golden_export import first_golden_case
from tests.helpers.standalone import harness_hidden, run_standalone

MHA_CASE = ('{"dtype":"float32","seed":1,"batch":1,"heads":2,"q_len":64,"kv_len":64,'
            '"head_dim":32,"causal":true}')
SDPA_CASE = ('{"dtype":"float32","seed":2,"batch":2,"q_len":16,"kv_len":24,"heads":4,'
             '"kv_heads":2,"head_dim":16,"is_causal":false,"bias":"head-shared",'
             '"mask":"full","mask_keep":0.8,"window":[6,2],"q_lengths":[16,12],'
             '"kv_lengths":[24,20]}')

# A planted bug in a module that knows nothing of the harness: the output is 1% too large.
PLANTED_MHA = '''
from jax.experimental.pallas.ops.gpu import attention

def mha(q, k, v, segment_ids, **kwargs):
    res = attention.mha(q, k, v, segment_ids, **kwargs)
    if kwargs.get("return_residuals"):
        return res[0] * 1.01, res[1]
    return res * 1.01
'''

SPLASH_CASE = ('{"dtype":"float32","seed":5,"batch":2,"num_q_heads":4,"num_kv_heads":2,'
               '"q_len":256,"kv_len":384,"masks":["causal(offset=128)",'
               '"local(left=100, right=20, offset=0)","random(seed=3, density=0.5) | '
               'causal(offset=0)","numpy(chunked(chunk=127))"],"q_segments":[[1,100],[2,156]],'
               '"kv_segments":[[1,200],[2,184]],"soft_cap":20.0,"sinks":true}')
SPLASH_SMALL = ('{"dtype":"float32","seed":6,"num_q_heads":2,"q_len":256,"kv_len":256,'
                '"masks":["causal(offset=0)"],"soft_cap":5.0}')

# A planted bug confined to one small slice: the last query row of head 1 (which averages
# 64 value rows, so its magnitude is a fraction of row 0's) is 0.1% too large. Against the
# global scale that is below the float32 tolerance; against its own row it is 5x over.
PLANTED_MHA_ONE_ROW = '''
from jax.experimental.pallas.ops.gpu import attention

def mha(q, k, v, segment_ids, **kwargs):
    res = attention.mha(q, k, v, segment_ids, **kwargs)
    if kwargs.get("return_residuals"):
        return res[0].at[:, -1, 1, :].multiply(1.001), res[1]
    return res.at[:, -1, 1, :].multiply(1.001)
'''

# A planted splash factory (no BlockSizes of its own) that silently drops the soft cap.
PLANTED_SPLASH = '''
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sk

def make(mask, *, attn_logits_soft_cap=None, **kwargs):
    return sk.make_splash_mha(mask, attn_logits_soft_cap=None, **kwargs)
'''

# A planted SDPA that silently drops the local window.
PLANTED_SDPA = '''
import jax

def sdpa(query, key, value, bias=None, mask=None, *, local_window_size=None, **options):
    return jax.nn.dot_product_attention(query, key, value, bias, mask,
                                        implementation="xla", **options)
'''


def _plant(tmp_path: Path, name: str, source: str) -> Path:
    kernels = tmp_path / "kernels"
    kernels.mkdir(exist_ok=True)
    (kernels / f"{name}.py").write_text(textwrap.dedent(source))
    return kernels


def test_the_clean_interpreter_really_hides_the_harness(tmp_path: Path) -> None:
    assert harness_hidden(tmp_path)


@pytest.mark.nightly  # one family's script; the mechanism runs per push (sdpa, hstu)
@pytest.mark.triton_ops  # gpu-mha: skipped with the reason on a jax without the ops
def test_gpu_mha_planted_exits_1_pristine_exits_0(tmp_path: Path) -> None:
    fam = get_family("gpu-mha")
    case = build_case(fam, MHA_CASE)
    kernels = _plant(tmp_path, "planted_mha", PLANTED_MHA)
    planted, _ = export_repro(fam, case, tmp_path / "planted" / "repro.py",
                              impl_spec="planted_mha:mha")
    pristine, _ = export_repro(fam, case, tmp_path / "pristine" / "repro.py")
    bad = run_standalone(planted, extra_path=kernels)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "FAIL out" in bad.stdout and "max rel err 0.01" in bad.stdout
    assert "ok   lse" in bad.stdout  # the planted bug leaves lse alone
    good = run_standalone(pristine)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "jax " in good.stdout and "interpret=True" in good.stdout
    assert good.stdout.count("ok  ") == 5  # out, lse, dq, dk, dv


@pytest.mark.triton_ops
def test_an_error_in_one_small_row_fails_the_script_as_it_fails_the_harness(
    tmp_path: Path,
) -> None:
    fam = get_family("gpu-mha")
    case = build_case(fam, MHA_CASE)
    kernels = _plant(tmp_path, "planted_mha_row", PLANTED_MHA_ONE_ROW)
    planted, _ = export_repro(fam, case, tmp_path / "repro.py", impl_spec="planted_mha_row:mha")
    bad = run_standalone(planted, extra_path=kernels)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    (line,) = [ln for ln in bad.stdout.splitlines() if ln.startswith("FAIL out")]
    rel = float(line.split("max rel err ")[1].split(",")[0])
    own = float(line.split("in its own slice ")[1].split()[0])
    assert rel < 2e-4 < own, line  # the global judge alone would have passed it
    assert "query=63 head=1" in line


@pytest.mark.triton_ops
def test_an_output_with_no_element_compared_fails_the_script(tmp_path: Path) -> None:
    fam = get_family("gpu-mha")
    script, npz = export_repro(fam, build_case(fam, MHA_CASE), tmp_path / "repro.py")
    with np.load(npz) as data:
        arrays = dict(data)
    arrays["valid:out"] = np.zeros(np.broadcast_shapes(arrays["q"].shape), bool)
    np.savez_compressed(npz, **arrays)
    res = run_standalone(script)
    assert res.returncode == 1, res.stdout + res.stderr
    assert any(ln.startswith("FAIL out") and "compared 0" in ln for ln in res.stdout.splitlines())
    assert "ok   lse" in res.stdout  # the other outputs are still judged


def test_sdpa_planted_exits_1_pristine_exits_0(tmp_path: Path) -> None:
    fam = get_family("sdpa")
    case = build_case(fam, SDPA_CASE)
    kernels = _plant(tmp_path, "planted_sdpa", PLANTED_SDPA)
    planted, _ = export_repro(fam, case, tmp_path / "planted.py", impl_spec="planted_sdpa:sdpa")
    pristine, _ = export_repro(fam, case, tmp_path / "pristine.py")
    bad = run_standalone(planted, extra_path=kernels)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    good = run_standalone(pristine)
    assert good.returncode == 0, good.stdout + good.stderr
    assert good.stdout.count("ok  ") == 5  # out, dq, dk, dv, dbias


@pytest.mark.nightly  # one family's script; the mechanism runs per push (sdpa, hstu)
def test_splash_planted_exits_1_pristine_exits_0(tmp_path: Path) -> None:
    fam = get_family("splash")
    case = build_case(fam, SPLASH_SMALL)
    kernels = _plant(tmp_path, "planted_splash", PLANTED_SPLASH)
    planted, _ = export_repro(fam, case, tmp_path / "planted.py", impl_spec="planted_splash:make")
    pristine, _ = export_repro(fam, case, tmp_path / "pristine.py")
    bad = run_standalone(planted, extra_path=kernels)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "FAIL out" in bad.stdout
    good = run_standalone(pristine)
    assert good.returncode == 0, good.stdout + good.stderr


def _load(script: Path):
    spec = importlib.util.spec_from_file_location(f"exported_{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("family", "case_json"),
    [
        # gpu-mha's nightly: sdpa's and splash's scripts take the same path per push.
        pytest.param("gpu-mha", MHA_CASE, marks=(pytest.mark.triton_ops, pytest.mark.nightly)),
        pytest.param("gpu-mha", '{"dtype":"bfloat16","seed":3,"batch":2,"heads":1,"q_len":32,'
                     '"kv_len":32,"head_dim":16,"segment_runs":[[[1,10],[0,22]],[[2,32]]],'
                     '"scale_mode":"prescaled-q"}',
                     marks=(pytest.mark.triton_ops, pytest.mark.nightly)),
        ("sdpa", SDPA_CASE),
        ("splash", SPLASH_CASE),
    ],
)
def test_the_scripts_reference_is_the_harness_reference(
    tmp_path: Path, family: str, case_json: str
) -> None:
    """The script's short reference and inputs agree with the family's own reference."""
    fam = get_family(family)
    case = build_case(fam, case_json)
    script, _ = export_repro(fam, case, tmp_path / f"{family.replace('-', '_')}.py")
    module = _load(script)
    x, valid = module.load_inputs()
    inputs = case.materialize()
    for name, a in inputs.items():
        assert x[name].dtype == a.dtype and np.array_equal(x[name], a), name
    theirs = module.reference(x)
    ours = fam.reference(case, inputs)
    assert set(module.TOL) <= set(ours)
    for name in module.TOL:  # float32 rounding only: 1e-5 of the output's scale
        err = np.max(np.abs(np.asarray(theirs[name], np.float32) - ours[name]))
        assert err <= 1e-5 * max(np.max(np.abs(ours[name])), 1e-30), (name, err)
    assert set(valid) == set(fam.valid(case))


def test_outside_contract_builds_a_case_the_strategy_never_draws() -> None:
    fam = get_family("gpu-mha")
    text = ('{"dtype":"float32","seed":0,"batch":1,"heads":1,"q_len":128,"kv_len":64,'
            '"head_dim":32,"causal":true,"block_q_dq":64}')
    with pytest.raises(ValueError, match="causal mask needs q_len <= kv_len"):
        build_case(fam, text)
    case = build_case(fam, text, outside_contract=True)
    assert (case.q_len, case.kv_len, case.block_q) == (128, 64, 32)
    assert case.q_heads == 1  # a stored case's old name `heads` still reads
    with pytest.raises(ExportError, match="no field"):
        build_case(fam, '{"dtype":"float32","seed":0,"bogus":1}', outside_contract=True)


def _register_toy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registers the test-local toy family, which has no export hook (every built-in family
    has one)."""
    from kernel_harness.records import registry

    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy", "tests.helpers.toy_family:FAMILY")


@pytest.mark.triton_ops
def test_cli_export_repro(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                          monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "r.py"
    assert main(["export-repro", "gpu-mha", "--case", MHA_CASE, "--out", str(out)]) == 0
    assert out.exists() and out.with_suffix(".npz").exists()
    # Beside the harness's own judge and the attention op's reference, embedded verbatim
    # (tests/regression/test_export_judge.py), the script names no kernel_harness, not even in
    # a comment, and is a screen or two.
    text = out.read_text()
    assert judge_source() in text and op_source() in text
    own = text.replace(judge_source(), "").replace(op_source(), "")
    assert "kernel_harness" not in own
    assert len(own.splitlines()) < 140  # 10 of them the element bound's (ELEMENTS)
    # A family without an export hook is a usage error naming the hook.
    _register_toy(monkeypatch)
    toy = '{"dtype":"float32","seed":0,"length":4}'
    assert main(["export-repro", "toy", "--case", toy, "--out", str(out)]) == 2
    assert "no export hook" in capsys.readouterr().err
    assert main(["export-repro", "gpu-mha", "--case", MHA_CASE, "--out", str(out),
                 "--impl", "nocolon"]) == 2
    assert "MODULE:ATTR" in capsys.readouterr().err
    assert main(["export-repro", "gpu-mha", "--case", MHA_CASE, "--out", str(out),
                 "--backend", "tpu"]) == 2
    assert main(["export-repro", "gpu-mha", "--case", '{"dtype":"float32"}',
                 "--out", str(out)]) == 2


def test_failure_report_prints_the_export_command(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernel_harness.core.backends import resolve_backend
    from kernel_harness.run.report import export_command
    from kernel_harness.run.runner import CaseResult

    def result(family: str, case: object) -> CaseResult:
        return CaseResult(family=family, case=case, backend=resolve_backend("interpret"),
                          impl="x", impl_spec="my_mod:mha", verdicts=(), excluded={},
                          seconds=0.0)

    case = build_case(get_family("gpu-mha"), MHA_CASE)
    command = export_command(result("gpu-mha", case))
    assert command is not None
    assert command.startswith("kernel-harness export-repro gpu-mha --backend interpret --case ")
    assert "--impl my_mod:mha --out repro_gpu_mha.py" in command
    # no hook: no command that would fail
    _register_toy(monkeypatch)
    assert get_family("toy").export is None
    assert export_command(result("toy", case)) is None


# A top-level module with splash's own names (as a vendored copy of splash_attention_kernel.py
# is): the script used to derive its mask module as ".splash_attention_mask" (a TypeError).
TOP_LEVEL_SPLASH = '''
from jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_kernel import (
    BlockSizes, QKVLayout, SegmentIds, make_splash_mha)
'''


def test_splash_impl_from_a_top_level_module_and_what_to_do_when_it_does_not_import(
        tmp_path: Path) -> None:
    fam = get_family("splash")
    case = build_case(fam, SPLASH_SMALL)
    kernels = _plant(tmp_path, "vendored_splash", TOP_LEVEL_SPLASH)
    script, _ = export_repro(fam, case, tmp_path / "vendored.py",
                             impl_spec="vendored_splash:make_splash_mha")
    assert "run this script where `import vendored_splash` works" in script.read_text()
    good = run_standalone(script, extra_path=kernels)
    assert good.returncode == 0, good.stdout + good.stderr
    lost = run_standalone(script)
    assert lost.returncode == 2, lost.stdout + lost.stderr  # a setup error, not a kernel FAIL
    assert "cannot import vendored_splash (--impl vendored_splash:make_splash_mha)" in lost.stderr
    assert "PYTHONPATH" in lost.stderr


@pytest.mark.triton_ops  # a --family-module copy of gpu-softmax
def test_the_export_line_carries_the_family_module_and_the_tolerances(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 56: the export line of a --family-module family names the module (else it
    cannot find the family), and a check loosened with --tolerance exports a script judging
    with the same limits (export-repro takes the flags)."""
    import shlex

    from kernel_harness.core.backends import resolve_backend
    from kernel_harness.records import registry
    from kernel_harness.run.report import export_command
    from kernel_harness.run.runner import CaseResult

    (tmp_path / "my_softmax.py").write_text(
        "import dataclasses\nfrom kernel_harness import get_family\n"
        "FAMILY = dataclasses.replace(get_family('gpu-softmax'), name='my-softmax')\n")
    monkeypatch.setattr(registry, "_from_modules", {})
    monkeypatch.setattr(registry, "_loaded_modules", set())
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.load_family_modules(["my_softmax"])
    fam = get_family("my-softmax")
    case = fam.seed_cases(frozenset())[0] if fam.seed_cases(frozenset()) else \
        first_golden_case("gpu-softmax")
    result = CaseResult(family=fam.name, case=case, backend=resolve_backend("interpret"),
                        impl="x", impl_spec=None, verdicts=(), excluded={}, seconds=0.0,
                        adjustments=("--tolerance", "out=0.05"))
    command = shlex.split(export_command(result))
    assert command[command.index("--family-module") + 1] == "my_softmax"
    assert command[command.index("--tolerance") + 1] == "out=0.05"
    out = tmp_path / "r.py"
    command[command.index("--out") + 1] = str(out)
    assert main(command[1:]) == 0
    assert "'out': 0.05" in out.read_text()
