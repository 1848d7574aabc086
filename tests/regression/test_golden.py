"""Golden files: round trip, lossless bfloat16, loud failures, goldens of another backend, CLI,
pytest."""

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from kernel_harness import cli
from kernel_harness.core.backends import resolve_backend
from kernel_harness.records import registry
from kernel_harness.regression import golden
from tests.helpers import toy_family
from tests.helpers.toy_family import FAMILY as TOY
from tests.helpers.toy_family import ToyCase

BACKEND = resolve_backend("interpret")
REPO = Path(__file__).resolve().parents[2]
CASES = [
    golden.GoldenCase(name="len4", case=ToyCase(dtype="float32", seed=1, length=4), tags=("ci",),
                      why="shortest"),
    golden.GoldenCase(name="len8", case=ToyCase(dtype="float32", seed=2, length=8)),
]


@pytest.fixture
def root(tmp_path):
    golden.save_manifest(TOY, CASES, tmp_path)
    return tmp_path


@pytest.fixture
def recorded(root):
    outcomes = golden.run_family(TOY, BACKEND, mode="record", root=root)
    assert [o.status for o in outcomes] == ["RECORDED", "RECORDED"], outcomes
    return root


def _check(root, **kw):
    return golden.run_family(TOY, BACKEND, mode="check", root=root, **kw)


def test_record_then_check_passes_and_files_are_complete(recorded):
    outcomes = _check(recorded)
    assert [(o.name, o.status) for o in outcomes] == [("len4", "PASS"), ("len8", "PASS")]
    meta = json.loads((recorded / "toy" / "len8.json").read_text())
    assert meta["schema_version"] == golden.SCHEMA_VERSION
    assert meta["case"] == {"dtype": "float32", "length": 8, "seed": 2}
    env = meta["environment"]
    assert env["backend"] == "interpret" and env["jax_version"] and env["jaxlib_version"]
    assert env["device_kind"] and meta["tolerances"] == {"y": 1e-5, "dx": 1e-5}
    assert len(meta["sha256"]["inputs"]) == 64
    with np.load(recorded / "toy" / "len8.npz", allow_pickle=False) as npz:
        assert set(npz.files) == {"input.x", "input.dy", "reference.y", "reference.dx"}


def test_planted_bug_fails_against_the_stored_reference(recorded):
    outcomes = _check(recorded, impl=toy_family.wrong_softplus)
    assert {o.status for o in outcomes} == {"FAIL"}
    assert "kernel y: max rel err" in outcomes[0].detail


def test_reference_drift_is_caught(recorded):
    drifted = TOY.__class__(**{**TOY.__dict__, "reference": lambda case, inputs: {
        k: v * (1 + 1e-4) for k, v in toy_family._reference(case, inputs).items()}})
    outcomes = golden.run_family(drifted, BACKEND, mode="check", root=recorded)
    assert {o.status for o in outcomes} == {"FAIL"}
    assert "reference drift y" in outcomes[0].detail


def test_bfloat16_is_stored_losslessly_without_pickle(tmp_path):
    rng = np.random.default_rng(0)
    x = np.asarray(jnp.asarray(rng.standard_normal((3, 5)), jnp.bfloat16))
    gcase = golden.GoldenCase(name="bf", case=ToyCase(dtype="float32", seed=0, length=4))
    golden.write_golden(TOY, gcase, {"x": x}, {"y": x.astype(np.float32), "dx": x},
                        backend=BACKEND, kernel_stats={}, impl="-", root=tmp_path)
    with np.load(tmp_path / "toy" / "bf.npz", allow_pickle=False) as npz:
        assert npz["input.x"].dtype == np.uint16
    stored = golden.load_golden(TOY, gcase, tmp_path)
    assert stored.inputs["x"].dtype == jnp.bfloat16
    np.testing.assert_array_equal(stored.inputs["x"].view(np.uint16), x.view(np.uint16))


def test_missing_golden_and_missing_manifest_fail_loudly(root, tmp_path_factory):
    outcomes = _check(root)
    assert {o.status for o in outcomes} == {"ERROR"}
    assert "missing golden file" in outcomes[0].detail
    assert "kernel-harness golden record toy --case len4" in outcomes[0].detail
    empty = tmp_path_factory.mktemp("empty")
    (outcome,) = _check(empty)
    assert outcome.status == "ERROR" and "no golden manifest" in outcome.detail


def test_corrupt_npz_is_a_clear_error(recorded):
    path = recorded / "toy" / "len4.npz"
    path.write_bytes(path.read_bytes()[:100])
    (outcome,) = _check(recorded, names=["len4"])
    assert outcome.status == "ERROR" and "corrupt array file" in outcome.detail


def test_tampered_arrays_fail_the_hash(recorded):
    path = recorded / "toy" / "len4.npz"
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["reference.y"] = arrays["reference.y"] + 1e-3
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    (outcome,) = _check(recorded, names=["len4"])
    assert outcome.status == "ERROR"
    assert "sha256 of the reference does not match" in outcome.detail


def test_pickled_object_arrays_are_refused(recorded):
    path = recorded / "toy" / "len4.npz"
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["input.x"] = np.array([{"a": 1}], dtype=object)
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    (outcome,) = _check(recorded, names=["len4"])
    assert outcome.status == "ERROR" and "len4.npz: corrupt array file" in outcome.detail
    assert "allow_pickle=False" in outcome.detail


def test_manifest_case_changed_after_recording_is_an_error(recorded):
    changed = [golden.GoldenCase(name="len4", case=ToyCase(dtype="float32", seed=9, length=4))]
    golden.save_manifest(TOY, changed, recorded)
    (outcome, *stray) = _check(recorded)
    assert outcome.status == "ERROR" and "differs from the manifest" in outcome.detail
    assert [o.name for o in stray] == ["len8.json", "len8.npz"]
    assert all(o.status == "ERROR" and "stray file" in o.detail for o in stray)


def _set_env(root, name, **fields):
    path = root / "toy" / f"{name}.json"
    meta = json.loads(path.read_text())
    meta["environment"].update(fields)
    path.write_text(json.dumps(meta))


def test_other_jax_version_is_compared_against_family_tolerances(recorded):
    _set_env(recorded, "len4", jax_version="0.0.1", jaxlib_version="0.0.1")
    outcomes = {o.name: o for o in _check(recorded)}
    assert outcomes["len4"].status == "PASS"
    (note,) = outcomes["len4"].notes
    assert note.startswith("versions differ: recorded on jax 0.0.1, jaxlib 0.0.1, this run jax ")
    assert "family tolerances" in note
    assert outcomes["len8"].status == "PASS" and outcomes["len8"].notes == ()
    # compared, so a wrong kernel fails on the golden of the other version too
    wrong = {o.name: o for o in _check(recorded, impl=toy_family.wrong_softplus)}
    assert wrong["len4"].status == "FAIL" and wrong["len8"].status == "FAIL"


def test_other_device_is_judged_against_the_reference_recomputed_here(recorded, capsys,
                                                                      toy_registry):
    for name in ("len4", "len8"):
        _set_env(recorded, name, device_kind="TPU v9", platform="tpu")
    outcomes = _check(recorded)
    assert [o.status for o in outcomes] == ["PASS", "PASS"], outcomes
    assert outcomes[0].notes[0] == (
        "recorded on backend=interpret, device_kind=TPU v9: kernel judged against the "
        "reference recomputed on interpret; reference drift bound 0.0001")
    assert outcomes[0].kernel and outcomes[0].drift
    assert golden.compared_nothing(outcomes) is None
    assert cli.main(["golden", "check", "toy", "--golden-dir", str(recorded)]) == 0
    out = capsys.readouterr().out
    assert "PASS: golden check on backend interpret" in out
    assert "(2 recorded on another backend or device, judged against the reference " in out
    # compared, so a planted kernel bug fails the golden recorded elsewhere
    wrong = _check(recorded, impl=toy_family.wrong_softplus)
    assert [o.status for o in wrong] == ["FAIL", "FAIL"]
    assert "kernel y: max rel err" in wrong[0].detail
    assert cli.main(["golden", "check", "toy", "--golden-dir", str(recorded),
                     "--impl", "tests.helpers.toy_family:wrong_softplus"]) == 1


def _both_scaled(factor):
    """The toy family as another device might compute it: kernel and reference both off
    by ``factor`` from the recorded numbers."""
    family = TOY.__class__(**{**TOY.__dict__, "reference": lambda case, inputs: {
        k: v * factor for k, v in toy_family._reference(case, inputs).items()}})
    return family, lambda x: toy_family.softplus(x) * factor


def test_the_drift_bound_fits_the_two_backends(recorded):
    family, impl = _both_scaled(1 + 5e-5)

    def check(name):
        (o,) = golden.run_family(family, BACKEND, mode="check", root=recorded, names=[name],
                                 impl=impl)
        return o

    # Same device: the stored reference is the yardstick, and 5e-5 is beyond its 1e-5 drift.
    same = check("len8")
    assert same.status == "FAIL" and "kernel y" in same.detail and "reference drift y" in (
        same.detail)
    # Another platform: judged against the reference recomputed here (kernel passes), and a
    # drift of 5e-5 is inside the cross-device bound of 1e-4.
    _set_env(recorded, "len4", device_kind="TPU v9", platform="tpu")
    other = check("len4")
    assert other.status == "PASS", other
    assert 4e-5 < max(v.stats.max_rel_err for v in other.drift) < 1e-4
    # Another backend name on the same platform and device (interpret vs tpu-interpret, both
    # on the CPU): the reference computes the same, so the one-device bound of 1e-5 holds.
    _set_env(recorded, "len8", backend="tpu-interpret")
    renamed = check("len8")
    assert renamed.status == "FAIL" and "kernel y" not in renamed.detail
    assert "reference drift y" in renamed.detail
    # A reference that moved by more than the cross-device bound fails, the kernel passing.
    family, impl = _both_scaled(1 + 1e-3)
    (far,) = golden.run_family(family, BACKEND, mode="check", root=recorded, names=["len4"],
                               impl=impl)
    assert far.status == "FAIL" and far.detail.startswith("reference drift y")


def test_nothing_compared_is_not_a_pass(recorded, capsys, toy_registry):
    """Only a family that cannot run on the backend is skipped now; if that is all a check
    selected, it is FAIL, not a pass."""
    interpret_only = golden.run_family(TOY, resolve_backend("tpu-interpret"), mode="check",
                                       root=recorded)
    assert [o.status for o in interpret_only] == ["SKIP"]
    assert golden.compared_nothing(interpret_only).startswith("no golden was compared")
    assert cli.main(["golden", "check", "toy", "--golden-dir", str(recorded),
                     "--backend", "tpu-interpret"]) == 1
    out = capsys.readouterr().out
    assert "FAIL: golden check" in out and "not a pass: no golden was compared" in out


def test_cli_reports_goldens_of_another_jax_version(recorded, capsys, toy_registry):
    for name in ("len4", "len8"):
        _set_env(recorded, name, jax_version="0.0.1")
    assert cli.main(["golden", "check", "toy", "--golden-dir", str(recorded)]) == 0
    out = capsys.readouterr().out
    assert "2 pass (2 recorded on another jax version, compared against the family " in out


def test_record_keeps_existing_files_unless_forced_and_refuses_failing_kernels(recorded):
    assert {o.status for o in golden.run_family(TOY, BACKEND, mode="record", root=recorded)} == {
        "KEPT"}
    (bad,) = golden.run_family(TOY, BACKEND, mode="record", root=recorded, names=["len4"],
                               force=True, impl=toy_family.wrong_softplus)
    assert bad.status == "ERROR" and "the kernel fails this case" in bad.detail
    assert _check(recorded, names=["len4"])[0].status == "PASS"


@pytest.fixture
def toy_registry(monkeypatch):
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy", "tests.helpers.toy_family:FAMILY")


def test_cli_add_record_check(capsys, toy_registry, tmp_path):
    d = ["--golden-dir", str(tmp_path)]
    case = '{"dtype":"float32","seed":5,"length":4}'
    assert cli.main(["golden", "add", "toy", "pinned", "--case", case, "--tag", "ci", *d]) == 0
    assert cli.main(["golden", "check", "toy", *d]) == 0
    out = capsys.readouterr().out
    assert "pinned  PASS" in out and "PASS: golden check on backend interpret, jax " in out
    assert out.rstrip().endswith(": 1 pass")
    code = cli.main(["golden", "check", "toy", *d,
                     "--impl", "tests.helpers.toy_family:wrong_softplus"])
    assert code == 1 and "FAIL: golden check" in capsys.readouterr().out
    assert cli.main(["golden", "add", "toy", "pinned", "--case", case, *d]) == 2
    assert "already has a golden case 'pinned'" in capsys.readouterr().err


def test_pytest_force_regen_flag(root):
    """Without the flag a missing golden fails; with it the files are written, then checked."""
    env = {**os.environ, "KERNEL_HARNESS_GOLDEN_DIR": str(root)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "tests.helpers.toy_registry",
           "-p", "no:randomly",
           "-p", "no:xdist", "properties/test_golden.py", "--kh-family", "toy", "-k", "toy"]
    run = functools.partial(subprocess.run, capture_output=True, text=True, env=env,
                            check=False, cwd=REPO)
    first = run(cmd)
    assert first.returncode == 1 and "missing golden file" in first.stdout, first.stdout
    regen = run([*cmd, "--force-regen"])
    assert regen.returncode == 0 and "rewrote 2 golden case(s) of toy" in regen.stdout
    again = run(cmd)
    assert again.returncode == 0 and "1 passed" in again.stdout, again.stdout


def test_default_root_is_the_checkouts_golden_folder(monkeypatch):
    monkeypatch.delenv("KERNEL_HARNESS_GOLDEN_DIR", raising=False)
    assert golden.default_root("splash") == REPO / "golden"
    assert (golden.default_root("splash") / "splash" / "cases.json").is_file()


# Nightly: `.ci/run` checks every TPU family's goldens on tpu-interpret per push.
@pytest.mark.nightly
def test_a_real_golden_recorded_on_interpret_is_checked_on_tpu_interpret():
    """hstu's float32 golden (recorded on interpret) on tpu-interpret: the pristine kernel
    passes against the reference recomputed there, a planted bug fails it."""
    from tests.families.hstu.test_hstu_planted_bugs import pv_operands_in_bf16

    hstu = registry.get_family("hstu")
    tpu_interpret = resolve_backend("tpu-interpret")
    name = ["segments-window-edge-multiblock"]
    (ok,) = golden.run_family(hstu, tpu_interpret, mode="check", names=name)
    assert ok.status == "PASS", ok
    assert ok.notes[0].startswith("recorded on backend=interpret, device_kind=cpu: kernel "
                                  "judged against the reference recomputed on tpu-interpret")
    (bad,) = golden.run_family(hstu, tpu_interpret, mode="check", names=name,
                               impl=pv_operands_in_bf16)
    assert bad.status == "FAIL" and "kernel out: max rel err" in bad.detail


def test_a_crashing_kernel_is_an_error_with_the_crash_kind_and_its_frames(recorded):
    """Issue 25: a kernel that raises on a golden case: ERROR naming the exception, its
    crash kind and the kernel's own frames (run.crash), on that case only."""
    from tests.helpers.toy_impls import crashes_at_length_8

    outcomes = {o.name: o for o in _check(recorded, impl=crashes_at_length_8)}
    assert outcomes["len4"].status == "PASS"
    crashed = outcomes["len8"]
    assert crashed.status == "ERROR" and crashed.detail.startswith("CRASH (")
    assert "toy_impls.py:" in crashed.detail and "in crashes_at_length_8" in crashed.detail
