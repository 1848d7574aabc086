"""The overall progress line ``check`` prints after each unit of a long run: units and
families done and left, elapsed time and an ETA (README command 1 on a busy machine)."""

from kernel_harness.orchestration.session import position_line

UNITS = ["splash"] * 3 + ["hstu"] * 2 + ["gpu-mha"]


def test_families_done_and_left_elapsed_and_eta():
    assert position_line(UNITS, 2, 40.0) == (  # no family done yet: per unit
        "  [2/6 units, families 0 done / 3 left, 40s elapsed, ETA 1m20s]")
    assert position_line(UNITS, 3, 60.0) == (  # then per family
        "  [3/6 units, families 1 done / 2 left, 1m00s elapsed, ETA 2m00s]")
    assert position_line(UNITS, 5, 80.0) == (
        "  [5/6 units, families 2 done / 1 left, 1m20s elapsed, ETA 40s]")
    assert position_line(UNITS, 6, 90.0).startswith("  [6/6 units, families 3 done / 0 left")


def test_no_line_for_a_short_or_one_unit_run():
    assert position_line(UNITS, 1, 5.0) == ""
    assert position_line(["splash"], 1, 600.0) == ""
