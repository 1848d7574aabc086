"""export-repro for tpu-ragged-paged: the first golden case's script (carrying the harness's
TPU interpreter extensions as source) passes with kernel_harness not importable, a planted
kernel that drops the sliding window makes it exit 1.
(Its reference agrees with the harness's: tests/families/test_export_contract.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_harness.records.export import interpreter_source
from tests.helpers.golden_export import (
    export_and_run,
    export_and_run_planted,
    first_golden_case,
)

PLANTED = """
from jax.experimental.pallas.ops.tpu.ragged_paged_attention.kernel import (
    ragged_paged_attention)


def kernel(*operands, sliding_window=None, **options):
    return ragged_paged_attention(*operands, **options)
"""


@pytest.mark.nightly  # one family's script; the mechanism runs per push (sdpa, hstu)
def test_first_golden_case_script_passes_standalone(tmp_path: Path) -> None:
    assert first_golden_case("tpu-ragged-paged").sliding_window is not None
    good = export_and_run("tpu-ragged-paged", tmp_path)
    assert good.returncode == 0, good.stdout + good.stderr
    assert good.stdout.count("ok  ") == 1
    text = (tmp_path / "tpu_ragged_paged.py").read_text()
    assert interpreter_source() in text


@pytest.mark.nightly  # one family's script; the mechanism runs per push (sdpa, hstu)
def test_planted_dropped_window_exits_1(tmp_path: Path) -> None:
    bad = export_and_run_planted("tpu-ragged-paged", tmp_path, PLANTED, "planted_ragged")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "FAIL out" in bad.stdout
