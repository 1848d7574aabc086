"""Every family's invalid configurations raise a clear error, or are known findings; a
user's family lists its own (``Family.bad_inputs``) and ``bad-input`` runs them."""

from __future__ import annotations

import pytest

from kernel_harness import cli
from kernel_harness.checks import bad_input
from kernel_harness.records.bad_input import BadInput
from kernel_harness.records.registry import family_names, get_family

DECLARED = [get_family(n) for n in family_names() if get_family(n).bad_inputs is not None]
ENTRIES = [(family.name, entry) for family in DECLARED for entry in family.bad_inputs()]


def test_the_tpu_attention_families_declare_lists():
    assert {"splash", "flash", "hstu"} <= {f.name for f in DECLARED}


@pytest.mark.parametrize(("family", "entry"), ENTRIES,
                         ids=[f"{f}:{e.name}" for f, e in ENTRIES])
def test_bad_input_behaves_as_declared(family, entry):
    result = bad_input.run_bad_input(family, entry)
    assert result.as_declared, result.describe()


def test_classification():
    def boom():
        raise ValueError("block_q=3 is bad")

    clear = BadInput("x", boom, r"block_q=3")
    assert bad_input.run_bad_input("f", clear).observed == "clear"
    vague = BadInput("x", boom, r"segment", status="unclear", finding="vague")
    assert bad_input.run_bad_input("f", vague).observed == "unclear"
    silent = BadInput("x", lambda: 1, r"anything")
    result = bad_input.run_bad_input("f", silent)
    assert result.observed == "silent" and not result.as_declared
    assert "CHANGED" in result.describe()
    with pytest.raises(ValueError, match="needs its finding"):
        BadInput("x", boom, "", status="silent")


def test_a_family_without_a_list_is_one_line_exit_2(capsys):
    """(A user's family's own list runs: tests/ops/test_rowwise.py, and the documented one in
    tests/test_docs_extending.py.)"""
    assert cli.main(["bad-input", "gpu-norm"]) == 2
    assert "no bad-input list for ['gpu-norm']" in capsys.readouterr().err
