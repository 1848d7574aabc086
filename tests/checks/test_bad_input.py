"""Every family's invalid configurations raise a clear error, or are known findings."""

from __future__ import annotations

import pytest

from kernel_harness.checks import bad_input

ENTRIES = [(family, entry) for family, build in bad_input.BAD_INPUTS.items()
           for entry in build()]


@pytest.mark.parametrize(("family", "entry"), ENTRIES,
                         ids=[f"{f}:{e.name}" for f, e in ENTRIES])
def test_bad_input_behaves_as_declared(family, entry):
    result = bad_input.run_bad_input(family, entry)
    assert result.as_declared, result.describe()


def test_classification():
    def boom():
        raise ValueError("block_q=3 is bad")

    clear = bad_input.BadInput("x", boom, r"block_q=3")
    assert bad_input.run_bad_input("f", clear).observed == "clear"
    vague = bad_input.BadInput("x", boom, r"segment", status="unclear", finding="vague")
    assert bad_input.run_bad_input("f", vague).observed == "unclear"
    silent = bad_input.BadInput("x", lambda: 1, r"anything")
    result = bad_input.run_bad_input("f", silent)
    assert result.observed == "silent" and not result.as_declared
    assert "CHANGED" in result.describe()
    with pytest.raises(ValueError, match="needs its finding"):
        bad_input.BadInput("x", boom, "", status="silent")
