"""`gate --fail-fast` stops at the first failing family and lists the rest NOT RUN."""

import json

from kernel_harness import cli
from kernel_harness.records import registry
from kernel_harness.regression import golden
from tests.helpers.toy_family import FAMILY as TOY
from tests.helpers.toy_family import ToyCase


def test_gate_fail_fast(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy", "tests.helpers.toy_family:FAMILY")
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy2", "tests.helpers.toy_family:FAMILY")
    golden.save_manifest(TOY, [golden.GoldenCase(name="a", case=ToyCase(
        dtype="float32", seed=1, length=4))], tmp_path)
    argv = ["gate", "--golden-dir", str(tmp_path)]
    assert cli.main([*argv, "toy", "--record"]) == 0
    # A baseline of zero error with a tiny floor: any real rounding error is "worse".
    path = tmp_path / "toy" / "baseline.json"
    data = json.loads(path.read_text())
    (section,) = data["sections"].values()  # one backend, this jax version
    for case in section["cases"].values():
        case["max_rel_err"] = {k: 0.0 for k in case["max_rel_err"]}
    path.write_text(json.dumps(data))
    capsys.readouterr()

    assert cli.main([*argv, "toy", "toy2", "--floor", "1e-30", "--fail-fast"]) == 1
    out = capsys.readouterr().out
    assert out.count("FAIL: toy:") == 1
    assert "toy: NOT RUN (--fail-fast: toy failed the gate)" in out

    assert cli.main([*argv, "toy", "toy2", "--floor", "1e-30"]) == 1
    out = capsys.readouterr().out
    assert out.count("FAIL: toy:") == 2 and "NOT RUN" not in out
