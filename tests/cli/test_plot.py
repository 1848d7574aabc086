"""Failure pictures: ``repro --plot`` and ``check --plot-dir`` draw a planted bug's error,
and without matplotlib the command stops with one line saying how to get it."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from kernel_harness import cli
from kernel_harness.records import registry

pytest.importorskip("matplotlib", reason="the [plot] extra is not installed")

CASE = '{"dtype":"float32","length":8,"seed":0}'
BUG = "tests.helpers.toy_family:wrong_softplus"


@pytest.fixture
def toy_registry(monkeypatch):
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy", "tests.helpers.toy_family:FAMILY")


def _image(path):
    import matplotlib.image

    return matplotlib.image.imread(str(path))


def test_repro_plot_draws_the_planted_bug(tmp_path, toy_registry, capsys):
    out = tmp_path / "bug.png"
    assert cli.main(["repro", "toy", "--case", CASE, "--impl", BUG, "--plot", str(out)]) == 1
    assert f"picture: {out}" in capsys.readouterr().out
    img = _image(out)
    assert img.shape[0] > 200 and img.shape[1] > 400
    assert np.ptp(img[..., :3]) > 0.5  # something is drawn, not a blank canvas


def test_check_plot_dir_draws_each_failing_property(tmp_path, toy_registry, capsys):
    code = cli.main(["check", "--no-isolate",
                     "toy", "--profile", "ci", "--max-examples", "3", "--impl", BUG,
                     "--property", "matches-reference", "--plot-dir", str(tmp_path)])
    assert code == 1
    assert (tmp_path / "toy-matches-reference.png").stat().st_size > 10_000


def test_without_matplotlib_one_line(tmp_path, toy_registry, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code = cli.main(["repro", "toy", "--case", CASE, "--plot", str(tmp_path / "x.png")])
    err = capsys.readouterr().err
    assert code == 2 and err == (
        "kernel-harness: error: failure pictures need matplotlib: "
        "pip install 'kernel-harness[plot]'\n")
