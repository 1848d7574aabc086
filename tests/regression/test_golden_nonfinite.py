"""Golden recording refuses a non-finite reference (issue 11): it would pin a hole."""

from kernel_harness.core.backends import resolve_backend
from kernel_harness.regression import golden
from tests.helpers.judge_planted import NAN_REFERENCE_TOY
from tests.helpers.toy_family import ToyCase


def test_record_refuses_a_nan_reference(tmp_path):
    cases = [golden.GoldenCase(name="len4", case=ToyCase(dtype="float32", seed=1, length=4))]
    golden.save_manifest(NAN_REFERENCE_TOY, cases, tmp_path)
    (outcome,) = golden.run_family(NAN_REFERENCE_TOY, resolve_backend("interpret"),
                                   mode="record", root=tmp_path)
    assert outcome.status == "ERROR"
    assert "not recorded: non-finite reference (y: 4 at index=0)" in outcome.detail
    assert not (tmp_path / "toy" / "len4.npz").exists()
