"""The accuracy gate: passes the unchanged kernel, fails a slightly less accurate one."""

import json

import pytest

from kernel_harness import cli
from kernel_harness.core.backends import resolve_backend
from kernel_harness.records import registry
from kernel_harness.regression import gate, golden
from tests.helpers.toy_family import FAMILY as TOY
from tests.helpers.toy_family import ToyCase

BACKEND = resolve_backend("interpret")

CASES = [
    golden.GoldenCase(name="a", case=ToyCase(dtype="float32", seed=1, length=4)),
    golden.GoldenCase(name="b", case=ToyCase(dtype="float32", seed=2, length=8)),
]


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy", "tests.helpers.toy_family:FAMILY")
    golden.save_manifest(TOY, CASES, tmp_path)
    return tmp_path


def _gate(capsys, root, *argv):
    code = cli.main(["gate", "toy", "--golden-dir", str(root), *argv])
    out, err = capsys.readouterr()
    return code, out + err


def test_gate_passes_unchanged_and_fails_slightly_worse_kernel(capsys, root):
    code, out = _gate(capsys, root, "--record")
    assert code == 0 and "recorded the interpret baseline of 2 cases" in out
    data = json.loads((root / "toy" / "baseline.json").read_text())
    assert data["schema_version"] == 2
    (key,) = data["sections"]
    assert key == gate.section_key(golden.environment(BACKEND))
    before = data["sections"][key]["cases"]["b"]["max_rel_err"]
    assert set(before) == {"y", "dx"} and before["y"] < 1e-6

    code, out = _gate(capsys, root)
    assert code == 0, out
    assert "case  output  before" in out and "PASS: toy: 0 of 4" in out

    # 3e-6 relative error is inside the 1e-5 tolerance: `check` passes it, the gate does not.
    code, out = _gate(capsys, root, "--impl", "tests.helpers.toy_impls:slightly_worse")
    assert code == 1, out
    assert "WORSE" in out and "FAIL: toy: 4 of 4 (case, output) pairs" in out
    row = next(line for line in out.splitlines() if line.startswith("b     y "))
    assert row.split()[-1] == "WORSE" and "x" in row.split()[4]

    # A looser factor accepts it; a kernel outside tolerance is FAIL whatever the factor.
    code, out = _gate(capsys, root, "--impl", "tests.helpers.toy_impls:slightly_worse",
                      "--factor", "1e3")
    assert code == 0, out
    code, out = _gate(capsys, root, "--impl", "tests.helpers.toy_family:wrong_softplus",
                      "--factor", "1e9")
    assert code == 1 and "FAIL" in out.split("verdict")[1]


def test_floor_keeps_noise_near_zero_from_failing(capsys, root):
    assert _gate(capsys, root, "--record")[0] == 0
    code, out = _gate(capsys, root, "--impl", "tests.helpers.toy_impls:within_noise")
    assert code == 0, out
    code, out = _gate(capsys, root, "--impl", "tests.helpers.toy_impls:within_noise",
                      "--floor", "1e-8")
    assert code == 1 and "WORSE" in out


def _as_other_version(root, version="0.0.1"):
    """Rewrites the recorded section as if recorded on another (older) jax version."""
    path = root / "toy" / "baseline.json"
    data = json.loads(path.read_text())
    (section,) = data["sections"].values()
    section["environment"]["jax_version"] = version
    data["sections"] = {gate.section_key(section["environment"]): section}
    path.write_text(json.dumps(data))
    return data


def test_missing_baseline_is_exit_2(capsys, root):
    code, out = _gate(capsys, root)
    assert code == 2 and "no toy baseline for backend interpret" in out


def test_older_jax_baseline_prints_the_drift_table_as_a_warning_and_is_not_a_pass(capsys, root):
    assert _gate(capsys, root, "--record")[0] == 0
    _as_other_version(root)
    code, out = _gate(capsys, root)
    assert code == 2, out
    assert "WARNING: version drift: toy on jax " in out and "recorded on jax 0.0.1" in out
    assert "case  output  before" in out and "no (case, output) pair moved beyond 2x" in out
    assert "no baseline recorded on jax " in out and "--record" in out
    # a kernel made worse shows in the drift section; outside tolerance it fails (exit 1)
    code, out = _gate(capsys, root, "--impl", "tests.helpers.toy_impls:slightly_worse")
    assert code == 2 and "4 (case, output) pair(s) worse than 2x the jax 0.0.1 baseline" in out
    code, out = _gate(capsys, root, "--impl", "tests.helpers.toy_family:wrong_softplus")
    assert code == 1 and "FAIL" in out.split("  verdict\n")[1]
    # --across-versions: the other version's baseline is the gate
    assert _gate(capsys, root, "--across-versions")[0] == 0


def test_record_adds_a_per_version_section_and_drift_stays_visible(capsys, root):
    assert _gate(capsys, root, "--record")[0] == 0
    _as_other_version(root)
    code, out = _gate(capsys, root, "--record")
    assert code == 0 and "on jax " in out
    data = json.loads((root / "toy" / "baseline.json").read_text())
    assert sorted(data["sections"]) == sorted(
        ["interpret jax 0.0.1", gate.section_key(golden.environment(BACKEND))])
    code, out = _gate(capsys, root)
    assert code == 0 and "PASS: toy: 0 of 4" in out
    assert "WARNING: version drift" in out  # the older version's table, as a warning


def test_schema_1_baselines_are_read(capsys, root):
    assert _gate(capsys, root, "--record")[0] == 0
    path = root / "toy" / "baseline.json"
    data = json.loads(path.read_text())
    (section,) = data["sections"].values()
    path.write_text(json.dumps({"schema_version": 1, "family": "toy",
                                "backends": {"interpret": section}}))
    code, out = _gate(capsys, root)
    assert code == 0 and "PASS: toy: 0 of 4" in out


def test_new_or_changed_cases_need_a_new_baseline(capsys, root):
    assert _gate(capsys, root, "--record")[0] == 0
    extra = golden.GoldenCase(name="c", case=ToyCase(dtype="float32", seed=3, length=4))
    golden.save_manifest(TOY, [*CASES, extra], root)
    code, out = _gate(capsys, root)
    assert code == 1 and "NEW" in out
    changed = [CASES[0], golden.GoldenCase(name="b", case=ToyCase(dtype="float32", seed=7,
                                                                  length=8))]
    golden.save_manifest(TOY, changed, root)
    code, out = _gate(capsys, root)
    assert code == 2 and "recorded for a different case" in out


def test_record_refuses_a_failing_kernel(capsys, root):
    code, out = _gate(capsys, root, "--record", "--impl", "tests.helpers.toy_family:wrong_softplus")
    assert code == 2 and "not recording a baseline, the kernel fails" in out
    assert not (root / "toy" / "baseline.json").exists()


def test_evaluate_rule():
    before = {"a": {"case": json.loads(CASES[0].case.to_json()), "max_rel_err": {"y": 1e-4}}}
    after = {"a": ({"y": 2.5e-4}, {"y": 1e-3}, {"y": True})}
    (row,) = gate.evaluate(before, after, CASES[:1], factor=2.0, floor=1e-6)
    assert row.verdict == "WORSE" and row.limit == pytest.approx(2e-4)
    (row,) = gate.evaluate(before, after, CASES[:1], factor=3.0, floor=1e-6)
    assert row.verdict == "ok"
    after = {"a": ({"y": 1e-5}, {"y": 1e-3}, {"y": True})}
    (row,) = gate.evaluate(before, after, CASES[:1])
    assert row.verdict == "better" and not row.failed


def test_a_baseline_without_a_later_defaulted_field_is_the_same_case():
    """A field added to a case type later, with a default (splash's logit_scale), is absent
    from older baselines; the gate must read them as the same case, and still refuse a
    baseline whose case really differs."""
    import dataclasses

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Grown(ToyCase):
        scale: float = 1.0

    g = golden.GoldenCase(name="a", case=Grown(dtype="float32", seed=1, length=4))
    after = {"a": ({"y": 1e-7}, {"y": 1e-5}, {"y": True})}
    old = {"dtype": "float32", "seed": 1, "length": 4}  # recorded before `scale` existed
    rows = gate.evaluate({"a": {"case": old, "max_rel_err": {"y": 1e-7}}}, after, [g])
    assert [r.verdict for r in rows] == ["ok"]
    with pytest.raises(gate.GateError, match="different case"):
        gate.evaluate({"a": {"case": {**old, "length": 8}, "max_rel_err": {"y": 1e-7}}},
                      after, [g])


def test_a_crashing_kernel_gets_the_crash_report_and_fails_the_gate(capsys, root):
    """Issue 25: a kernel that raises on a golden case prints the CRASH report (the
    exception, the kernel's own frames, the repro command), no traceback; exit 1."""
    code, out = _gate(capsys, root, "--record")
    assert code == 0, out
    code, out = _gate(capsys, root, "--impl", "tests.helpers.toy_impls:crashes_at_length_8")
    assert code == 1, out
    assert "the kernel crashed on a golden case" in out
    assert "[kernel-harness] CRASH toy float32" in out and "golden case: b" in out
    assert "toy_impls.py:" in out and "reproduce: kernel-harness repro toy" in out
    assert "Traceback" not in out


def test_goldens_runs_the_golden_check_first_and_either_failing_fails(capsys, root):
    """``gate --goldens``: the golden check of the same families, then the gate, in one
    process; a golden that no longer holds fails it even where the gate alone passes."""
    assert cli.main(["golden", "record", "toy", "--golden-dir", str(root)]) == 0
    assert _gate(capsys, root, "--record")[0] == 0
    code, out = _gate(capsys, root, "--goldens")
    assert code == 0, out
    assert out.index("PASS: golden check on backend interpret") < out.index("PASS: toy: 0 of 4")

    (root / "toy" / "a.npz").unlink()  # the stored case is gone: the golden check fails
    assert _gate(capsys, root)[0] == 0  # the gate alone does not read the golden files
    code, out = _gate(capsys, root, "--goldens")
    assert code == 1, out
    assert "FAIL: golden check" in out and "PASS: toy: 0 of 4" in out  # the gate still ran
    code, out = _gate(capsys, root, "--goldens", "--fail-fast")
    assert code == 1 and "NOT RUN (--fail-fast: the golden check failed)" in out, out
    assert "PASS: toy" not in out

    code, out = _gate(capsys, root, "--goldens", "--record")
    assert code == 2 and "run them one at a time" in out
