"""``kernel-harness bench``: a checked smoke run on CPU (every kernel has a row, memory
numbers present, the pre-check ran, the timed results judged, the timed program's Pallas
kernels counted and printed), planted wrong kernels reported FAIL and not timed, cheats
that pass the pre-check (a memoizing and a stale implementation) reported FAIL with their
class named, SDPA's compiled temporaries growing ~4x per doubling, and the timing loop
itself (fresh inputs per call, drawn untimed)."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from kernel_harness import cli
from kernel_harness.checks import bench as bench_mod
from kernel_harness.checks.bench import Timing
from kernel_harness.checks.bench_judge import (
    FEW_KERNELS,
    REPEATED,
    WRONG,
    kernels_problem,
    time_calls,
)
from kernel_harness.checks.bench_report import temp_growth
from kernel_harness.records.registry import family_names, get_family
from tests.helpers import bench_planted

SMALL = ["--seq-lens", "128", "--dtype", "f32", "--warmup", "0", "--iters", "2"]


def _bench(capsys, tmp_path, *argv):
    path = tmp_path / "bench.json"
    code = cli.main(["bench", *argv, "--json", str(path)])
    out, err = capsys.readouterr()
    doc = json.loads(path.read_text()) if path.exists() else None
    return code, out, err, doc


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """One run of every built-in family at length 128 (module-scoped: it is the slow part)."""
    path = tmp_path_factory.mktemp("bench") / "all.json"
    svg = path.with_suffix(".svg")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["bench", *SMALL, "--json", str(path), "--plot", str(svg)])
    return code, json.loads(path.read_text()), svg.read_text(), out.getvalue()


def test_every_kernel_has_a_checked_measured_row(smoke):
    code, doc, *_ = smoke
    assert code == 0
    assert doc["backend"] == "interpret" and doc["jax_version"] and doc["interpret_note"]
    rows = {r["family"]: r for r in doc["rows"]}
    assert set(rows) == set(family_names())
    for name, row in rows.items():
        assert name in rows
        if row["status"] == "SKIP":  # a family without a hook must say so, not vanish
            if get_family(name).bench is None:
                assert "no benchmark hook" in row["reason"], row
            else:  # or without a backend here (the gpu-* families on jax >= 0.12.1)
                assert not get_family(name).backends, row
                assert "cannot run on backend 'interpret'; it runs on none here (needs " \
                    in row["reason"], row
            continue
        assert row["status"] == "OK", row
        assert row["check"].startswith("pass ("), row["check"]  # the pre-check ran and passed
        # Which kernels really ran, from check's count (issue 36 item 5).
        expected = get_family(name).kernels
        assert (row["kernels"].startswith("fwd ") and "FALLBACK" not in row["kernels"]
                if expected else row["kernels"].startswith("not counted")), row["kernels"]
        t, m = row["timing"], row["memory"]
        assert t["iters_run"] >= 1 and t["compile_s"] > 0 and t["median_s"] > 0
        assert t["p25_s"] <= t["median_s"] <= t["p75_s"]
        assert m["argument_bytes"] > 0 and m["output_bytes"] > 0 and m["temp_bytes"] >= 0
        assert m["device_peak_bytes"] is None and "no memory statistics" in m["device_peak_note"]
        # Every call on its own inputs; the timed results judged against the reference.
        assert t["input_sets"] == t["warmup"] + t["iters_run"] == 2
        assert row["results"].startswith("pass (") and "seeds 1, 2" in row["results"], row
        # The timed program's own kernels: fwd >= 1 in --mode fwd (0 for XLA by design).
        assert row["timed_kernels"] >= (1 if expected else 0), row
    for name in ("splash", "flash", "sdpa", "hstu", "gpu-mha", "gpu-decode", "gpu-paged"):
        assert rows[name]["status"] == "OK" or not get_family(name).backends, rows[name]


def test_table_prints_the_timed_kernel_count_beside_the_time(smoke):
    _, doc, _, out = smoke
    lines = out.splitlines()
    header = next(x for x in lines if x.lstrip().startswith("kernel "))
    cols = header.split()
    assert cols[cols.index("median"):cols.index("median") + 6] == [
        "median", "ms", "p25-p75", "ms", "kernels", "results"], header
    for row in doc["rows"]:
        if row["status"] != "OK":
            continue
        line = next(x.split() for x in lines if x.split()[:1] == [row["family"]])
        # kernel, len, status, compile s, median ms, p25-p75 ms, kernels, results
        assert line[2] == "OK" and line[6] == str(row["timed_kernels"]) and line[7] == "ok"
    timed = "splash" if not get_family("gpu-mha").backends else "gpu-mha"  # jax >= 0.12.1
    assert f"{timed} @128" in out and "timed program: 1 Pallas kernel(s)" in out


def test_plot_has_a_line_per_kernel(smoke):
    _, doc, svg, _ = smoke
    assert svg.startswith("<svg") and "not kernel performance" in svg
    for row in doc["rows"]:
        if row["status"] == "OK":
            assert f">{row['family']}</text>" in svg


def test_planted_wrong_kernel_is_fail_and_not_timed(capsys, tmp_path, monkeypatch):
    def must_not_time(*a, **k):
        raise AssertionError("a configuration that failed its pre-check was timed")

    monkeypatch.setattr(bench_mod, "time_calls", must_not_time)
    code, out, _, doc = _bench(capsys, tmp_path, "sdpa", *SMALL,
                               "--impl", "tests.helpers.bench_planted:sdpa_ignores_causal")
    assert code == 1
    (row,) = doc["rows"]
    assert row["status"] == "FAIL" and row["timing"] is None and row["memory"] is None
    assert row["check"].startswith("FAIL") and "not timed" in row["reason"]
    assert "sdpa_ignores_causal" in row["impl"]
    assert "0 configuration(s) checked and timed, 1 FAIL/ERROR" in out


def test_crashing_kernel_is_fail_and_not_timed(capsys, tmp_path):
    code, _, _, doc = _bench(capsys, tmp_path, "sdpa", *SMALL,
                             "--impl", "tests.helpers.bench_planted:sdpa_crashes")
    (row,) = doc["rows"]
    assert code == 1 and row["status"] == "FAIL" and "planted crash" in row["check"]
    assert row["timing"] is None


def test_sdpa_temporaries_grow_about_4x_per_doubling(capsys, tmp_path):
    """float32 on the CPU: the (s, s) scores and probabilities dominate XLA's temporaries
    (bfloat16 adds O(s) conversion buffers: x3.5-3.7 at these small lengths). From 256 on:
    at 128 -> 256 XLA's buffer assignment differs (x2.67 measured), as the README says."""
    code, out, _, doc = _bench(capsys, tmp_path, "sdpa", "--seq-lens", "256,512,1024",
                               "--dtype", "f32", "--warmup", "0", "--iters", "1")
    assert code == 0
    steps = doc["temp_growth"]["sdpa"]
    assert [s[:2] for s in steps] == [[256, 512], [512, 1024]]
    for _, _, ratio in steps:
        assert 3.8 < ratio < 4.2, steps
    assert "sdpa temps: 256->512 x" in out


def test_temp_growth_tells_linear_from_quadratic():
    """The growth check can fail: linear temporaries give x2, not x4."""
    def row(n, temps):
        mem = bench_mod.Memory(argument_bytes=1, output_bytes=1, temp_bytes=temps,
                               alias_bytes=0, generated_code_bytes=0, device_peak_bytes=None,
                               device_peak_note="")
        return bench_mod.BenchRow(family="lin", impl="x", seq_len=n, dtype="float32",
                                  mode="fwd", backend="interpret", status="OK", check="pass",
                                  memory=mem)
    assert temp_growth([row(256, 2000), row(128, 1000)]) == {"lin": [(128, 256, 2.0)]}


def test_timing_loop_gives_each_call_fresh_untimed_inputs_and_respects_the_budget():
    now = [0.0]
    calls = []

    def inputs(i):
        now[0] += 100.0  # drawing inputs is slow: none of it may be timed
        return {"x": i}

    def call(args):
        now[0] += 1.0
        calls.append(args["x"])
        return args["x"] * 10

    run = time_calls(call, inputs, warmup=2, iters=50, max_seconds=3, keep=2,
                     clock=lambda: now[0])
    assert calls == [0, 1, 2, 3, 4]  # warm-up calls too: every call its own input set
    assert run.samples == [1.0, 1.0, 1.0]  # stopped once 3 s of timed calls had passed
    assert run.kept == [(3, 30), (4, 40)]  # the last calls' results, for the judge
    t = Timing.of([1.0, 1.0, 1.0, 1.0, 100.0], compile_s=0.5, warmup=2, iters_requested=5)
    assert t.median_s == 1.0 and t.max_s == 100.0 and t.iters_run == 5  # median, not mean
    assert t.input_sets == 7


@pytest.mark.parametrize("argv, message", [
    (["bench", "sdpa", "--seq-lens", "a,b"], "--seq-lens must be comma-separated integers"),
    (["bench", "sdpa", "--mode", "bwd"], "unknown mode 'bwd'"),
    (["bench", "sdpa", "--dtype", "int8"], "unknown dtype 'int8'"),
    (["bench", "sdpa", "flash", "--impl", "math:sqrt"], "name exactly one family"),
    (["bench", "sdpa", "--iters", "0"], "iters >= 1"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, message):
    code = cli.main(argv)
    _, err = capsys.readouterr()
    assert code == 2 and message in err and err.count("\n") == 1, err


@pytest.mark.triton_ops
def test_decode_kernels_have_no_backward_mode(capsys, tmp_path):
    code, _, _, doc = _bench(capsys, tmp_path, "gpu-decode", *SMALL, "--mode", "fwd+bwd")
    (row,) = doc["rows"]
    assert code == 0 and row["status"] == "SKIP" and "no 'fwd+bwd' mode" in row["reason"]


# Nightly: select's bench over every candidate; the bench itself runs per push on every family
# (the smoke fixture).
@pytest.mark.nightly
def test_select_bench_measures_every_candidate(capsys):
    code = cli.main(["select", "--bench", "--seq-len", "128"])
    out, _ = capsys.readouterr()
    assert code == 0
    for name in ("splash", "flash", "sdpa"):
        line = next(x for x in out.splitlines() if x.startswith(f"  {name} ["))
        assert "median" in line and "temps" in line and "pre-check pass" in line, line
    assert "[CHOSEN:" in out and "not kernel performance" in out


def test_timed_program_that_raises_is_an_error_row_not_a_pass():
    import dataclasses

    from kernel_harness.core.backends import resolve_backend

    def broken(impl, case, backend, mode):
        raise RuntimeError("planted: the timed program does not build")

    sdpa = get_family("sdpa")
    family = dataclasses.replace(sdpa, bench=dataclasses.replace(sdpa.bench, program=broken))
    settings = bench_mod.BenchSettings(backend=resolve_backend("interpret"), seq_lens=(128,),
                                       dtype="float32", mode="fwd", warmup=0, iters=1,
                                       max_seconds=1.0)
    (row,) = bench_mod.bench_family(family, settings)
    assert row.status == "ERROR" and row.timing is None and "planted" in row.reason
    assert row.check.startswith("pass (")  # the pre-check ran (and passed) before timing


@pytest.fixture
def fresh_planted():
    bench_planted.forget()  # the cheat's first call must be the pre-check's
    yield
    bench_planted.forget()


@pytest.mark.parametrize("impl, problem, word", [
    ("sdpa_memoized", REPEATED, "REPEATED"),  # caches its result per input shape
    ("sdpa_stale", WRONG, "WRONG"),  # returns the previous call's result
])
def test_cheat_that_passes_the_pre_check_fails_on_its_timed_results(
        capsys, tmp_path, fresh_planted, impl, problem, word):
    code, out, _, doc = _bench(capsys, tmp_path, "sdpa", *SMALL,
                               "--impl", f"tests.helpers.bench_planted:{impl}")
    (row,) = doc["rows"]
    assert row["check"].startswith("pass (")  # the pre-check alone is fooled
    assert code == 1 and row["status"] == "FAIL", row
    assert row["reason"].startswith(problem) and row["results"].startswith(problem), row
    table_row = next(x.split() for x in out.splitlines() if x.split()[:1] == ["sdpa"])
    assert table_row[2] == "FAIL" and table_row[4] == "-" and word in table_row, table_row
    assert f"sdpa @128 [tests.helpers.bench_planted:{impl}]: FAIL" in out
    assert problem in out and "0 configuration(s) checked and timed, 1 FAIL/ERROR" in out


def test_pristine_sdpa_passes_with_its_timed_results_judged(capsys, tmp_path):
    code, out, _, doc = _bench(capsys, tmp_path, "sdpa", *SMALL)
    (row,) = doc["rows"]
    assert code == 0 and row["status"] == "OK" and row["results"].startswith("pass ("), row
    assert row["timed_kernels"] == 0  # XLA by design: the count is printed, and 0
    table_row = next(x.split() for x in out.splitlines() if x.split()[:1] == ["sdpa"])
    assert table_row[2] == "OK" and table_row[6] == "0" and table_row[7] == "ok", table_row
    assert doc["judged_calls"] == 2 and "fresh input set per call" in doc["inputs"]


def test_timed_program_with_too_few_kernels_is_named():
    mha = get_family("gpu-mha")  # expects fwd >= 1, bwd >= 2
    assert kernels_problem(mha, None, "fwd", 1) == ""
    assert kernels_problem(mha, None, "fwd+bwd", 3) == ""
    assert kernels_problem(mha, None, "fwd+bwd", 2).startswith(FEW_KERNELS)
    assert kernels_problem(mha, None, "fwd", 0).startswith(FEW_KERNELS)
    assert kernels_problem(get_family("sdpa"), None, "fwd", 0) == ""  # XLA by design
