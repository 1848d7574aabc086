"""TPU interpret mode as a diagnostic: planted racy / uninitialized-scratch kernels of our own
are caught and named; clean kernels are not flagged; waivers and limitations are explicit."""

from __future__ import annotations

import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kernel_harness.core import compat
from kernel_harness.core.backends import resolve_backend
from kernel_harness.core.errors import KernelRaceDetected
from kernel_harness.run import diagnostics
from kernel_harness.run.findings import Finding
from kernel_harness.run.runner import check_case
from tests.helpers import planted_kernels as pk

PARAMS = compat.tpu_interpret_params()
X = jnp.arange(64 * 128, dtype=jnp.float32).reshape(64, 128) / 1000.0


def diagnose(fn, waivers=()):
    return diagnostics.diagnosed_run("planted", lambda: jax.block_until_ready(fn()),
                                     waivers=waivers)


def test_racy_kernel_is_named_with_buffer_and_grid_points():
    with pytest.raises(diagnostics.KernelRaceFailure) as err:
        diagnose(lambda: pk.racy_copy(X, interpret=PARAMS))
    assert isinstance(err.value, KernelRaceDetected)
    (finding,) = err.value.diagnosis.failures
    assert finding.kind == "race"
    assert "_copy_kernel" in finding.kernel
    assert finding.buffer.startswith("[output 0] (8, 128) float32")
    assert len(finding.grid_points) == 2 and "core 0" in finding.detail
    assert "core 1" in finding.detail


def test_uninitialized_scratch_read_is_named():
    with pytest.raises(diagnostics.UninitializedReadFailure) as err:
        diagnose(lambda: pk.row_block_sum(X, interpret=PARAMS, init=False))
    findings = err.value.diagnosis.failures
    # One per simulated core: each reads its own accumulator before writing it, at the
    # first step of the group it runs.
    assert len(findings) == 2
    assert {f.buffer.split("]")[0].split()[-1] for f in findings} == {"0", "1"}
    for finding in findings:
        assert finding.kind == "uninitialized-read"
        assert "_sum_kernel" in finding.kernel and "planted_kernels.py" in finding.line
        assert "vmem" in finding.buffer and "(8, 128) float32" in finding.buffer
        assert [p[1] for p in finding.grid_points] == [0]


def test_clean_kernels_have_no_findings_and_state_resets_after_a_failure():
    with pytest.raises(diagnostics.KernelRaceFailure):
        diagnose(lambda: pk.racy_copy(X, interpret=PARAMS))
    out, diagnosis = diagnose(lambda: pk.row_block_sum(X, interpret=PARAMS))
    assert diagnosis.findings == () and diagnosis.kernels == 1
    expected = np.asarray(X).reshape(2, 4, 8, 128).sum(axis=1).reshape(16, 128)
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-6)


def test_waiver_matches_and_is_counted(tmp_path):
    path = tmp_path / "waivers.json"
    path.write_text(json.dumps({"waivers": [{
        "family": "planted", "kind": "race", "kernel": "_copy_kernel",
        "buffer": r"^\[output 0\]", "reason": "test: the planted race is known"}]}))
    waivers = diagnostics.load_waivers(path)
    before = diagnostics.TOTALS["waived"]
    _, diagnosis = diagnose(lambda: pk.racy_copy(X, interpret=PARAMS), waivers=waivers)
    assert len(diagnosis.waived) == 1 and diagnosis.failures == ()
    assert diagnostics.TOTALS["waived"] == before + 1


def test_waiver_file_needs_a_reason(tmp_path):
    path = tmp_path / "waivers.json"
    path.write_text(json.dumps([{"family": "x", "kind": "race", "kernel": "k", "buffer": "b",
                                 "reason": " "}]))
    with pytest.raises(ValueError, match="needs a reason"):
        diagnostics.load_waivers(path)


def test_shipped_waiver_file_loads():
    waivers = diagnostics.load_waivers()
    assert all(w.reason for w in waivers)


def test_vmapped_kernel_is_reported_as_not_runnable():
    batched = jax.vmap(lambda x: pk.row_block_sum(x, interpret=PARAMS))
    with pytest.raises(diagnostics.TpuInterpretCannotRun, match="jax.vmap"):
        diagnose(lambda: batched(jnp.stack([X, X])))


def test_harness_check_fails_a_racy_family_kernel_on_tpu_interpret():
    def racy_attention(q, k, v, q_seg, kv_seg, *, block_q, causal, interpret):
        out = pk.tiny_attention(q, k, v, q_seg, kv_seg, block_q=block_q, causal=causal,
                                interpret=interpret)
        racy = pk.racy_copy(out[0, :64], interpret=interpret)
        return out.at[0, :8].add(racy * 0.0)

    case = pk.ToyAttentionCase(dtype="float32", seed=1, heads=1, causal=True)
    backend = resolve_backend("tpu-interpret")
    assert check_case(pk.TOY_ATTENTION, case, backend).passed
    with pytest.raises(KernelRaceDetected, match="_copy_kernel"):
        check_case(pk.TOY_ATTENTION, case, backend, racy_attention)


def test_waiver_scoped_to_other_jax_versions_does_not_apply(tmp_path):
    path = tmp_path / "waivers.json"
    here = ".".join(map(str, compat.JAX_VERSION[:2]))
    path.write_text(json.dumps({"waivers": [{
        "family": "planted", "kind": "race", "kernel": "_copy_kernel",
        "buffer": r"^\[output 0\]", "reason": "test: seen on another jax only",
        "jax": f"<{here}"}]}))
    (waiver,) = diagnostics.load_waivers(path)
    assert not waiver.applies_to_jax()
    with pytest.raises(diagnostics.KernelRaceFailure):
        diagnose(lambda: pk.racy_copy(X, interpret=PARAMS), waivers=(waiver,))


def test_jax_version_clauses():
    m = diagnostics.jax_version_matches
    assert m("", (0, 10, 2)) and m("<0.12", (0, 10, 2)) and not m("<0.12", (0, 12, 0))
    assert m(">=0.12", (0, 12, 0, 1)) and m("==0.12", (0, 12, 0, 1)) and not m("==0.12", (0, 13))
    assert m(">=0.10,<0.12", (0, 11, 1)) and not m(">=0.10,<0.12", (0, 9))
    with pytest.raises(ValueError, match="start it with"):
        m("0.12", (0, 12))


def test_shipped_splash_waiver_is_version_scoped():
    (splash,) = [w for w in diagnostics.load_waivers() if w.family == "splash"]
    assert splash.jax == "<0.12"
    assert splash.applies_to_jax((0, 10, 2)) and not splash.applies_to_jax((0, 12, 0, 1))


def test_waiver_line_pattern_scopes_it_to_one_access(tmp_path):
    """A waiver with ``line`` waives only findings whose offending access is on that line:
    the same race with another line pattern still fails."""
    def run(line):
        path = tmp_path / "waivers.json"
        path.write_text(json.dumps({"waivers": [{
            "family": "planted", "kind": "race", "kernel": "_copy_kernel",
            "buffer": r"^\[output 0\]", "line": line, "reason": "test: scoped by line"}]}))
        _, diagnosis = diagnose(lambda: pk.racy_copy(X, interpret=PARAMS),
                                waivers=diagnostics.load_waivers(path))
        return diagnosis

    seen = run("")
    assert len(seen.waived) == 1
    ((finding, _),) = seen.waived
    assert len(run("^" + re.escape(finding.line) + "$").waived) == 1
    with pytest.raises(KernelRaceDetected, match="race in kernel #0 _copy_kernel"):
        run(r"no_such_file\.py:\d+")


def test_shipped_gmm_waivers_still_match_with_the_kernels_counted():
    """The kernel count traces the implementation a second time, and a jitted kernel that
    the count traces first (gmm's dlhs kernel, reached only by the backward) keeps the
    count's source lines in jax's cache. The reviewed waivers name the adapter's call
    (families/megablox_gmm/kernel.py): with the count's lines they no longer matched, and
    CI's golden check on tpu-interpret failed with 2-3 unwaived reads per case."""
    from kernel_harness.records.registry import get_family
    from kernel_harness.regression.golden import check as golden_check
    from kernel_harness.regression.golden import store

    family = get_family("megablox-gmm")
    gcase = next(c for c in store.load_manifest(family)
                 if c.name == "ragged-empty-transpose-f32")
    outcome = golden_check.check_golden(family, gcase, resolve_backend("tpu-interpret"))
    assert outcome.status == "PASS", outcome.detail


def test_tpu_paged_empty_first_row_is_waived_only_at_the_block_copy():
    """Coverage steering found it (docs/kernel-coverage.md): a row of length 0 with
    inline_seq_dim=False never writes its output blocks, and the interpreter's copy-out reads
    them. The waiver keeps the case passing (the row is outside the contract) and is counted;
    a row with tokens is judged as before."""
    from kernel_harness.families.tpu_paged.cases import TpuPagedCase
    from kernel_harness.records.registry import get_family

    family = get_family("tpu-paged")
    fields = dict(dtype="float32", seed=0, batch=2, q_heads=2, kv_heads=2, head_dim=128,
                  page_size=16, pages_per_seq=1, spare_pages=0, shuffle=False, soft_cap=None,
                  pages_per_compute_block=1, shared_pages=0, quantized=False,
                  megacore_mode=None, inline_seq_dim=False)
    before = diagnostics.TOTALS["waived"]
    result = check_case(family, TpuPagedCase(lengths=(0, 15), **fields),
                        resolve_backend("tpu-interpret"))
    assert result.passed, result.failures
    assert diagnostics.TOTALS["waived"] >= before + 1
    assert not family.valid(TpuPagedCase(lengths=(0, 15), **fields))["out"][0].any()


USER_WAIVER = """[tool.kernel-harness]
[[tool.kernel-harness.waivers]]
family = "planted"
kind = "uninitialized-read"
kernel = "_sum_kernel"
buffer = "vmem"
reason = "test: the planted accumulator is read before it is written"
"""


@pytest.fixture
def user_waiver(tmp_path):
    """The waiver of a user's pyproject.toml, as a check session puts it in force; none after."""
    from kernel_harness.records.config import load_config

    (tmp_path / "pyproject.toml").write_text(USER_WAIVER)
    config = load_config(tmp_path)
    (waiver,) = diagnostics.user_waivers(config.waivers, str(config.source))
    yield waiver
    diagnostics.use_user_waivers(())


def test_a_user_waiver_applies_beside_the_package_file_and_is_reported(user_waiver):
    def run():
        return diagnostics.diagnosed_run("planted", lambda: jax.block_until_ready(
            pk.row_block_sum(X, interpret=PARAMS, init=False)))

    assert user_waiver.label == "pyproject.toml entry 1"
    with pytest.raises(diagnostics.UninitializedReadFailure):  # the package's file alone
        run()
    diagnostics.use_user_waivers([user_waiver])
    assert diagnostics.active_waivers()[:-1] == diagnostics.load_waivers()
    before = diagnostics.WAIVED[user_waiver]
    _, diagnosis = run()
    assert diagnosis.failures == () and len(diagnosis.waived) == 2
    assert {w for _, w in diagnosis.waived} == {user_waiver}
    line = diagnostics.summary_line()
    assert "pyproject.toml 1; entries for jax" in line, line
    assert (f"  waived {before + 2} finding(s) by pyproject.toml entry 1 (planted, "
            "uninitialized-read): test: the planted accumulator is read before it is "
            "written") in line.splitlines(), line


def test_a_failure_names_each_waived_findings_waiver_and_reason():
    def finding(buffer):
        return Finding(kind="uninitialized-read", kernel="k (x.py)", kernel_index=0,
                       buffer=buffer, line="x.py:3 (k)", detail="read before written",
                       grid_points=())

    waiver = diagnostics.Waiver(family="toy", kind="uninitialized-read", kernel="^k ",
                                buffer="scratch", reason="the select discards it",
                                source="/repo/pyproject.toml", entry=2)
    kept, waived = finding("[output 0]"), finding("scratch 0")
    assert waiver.matches("toy", waived)
    assert not waiver.matches("toy", kept) and not waiver.matches("other", waived)
    diagnosis = diagnostics.Diagnosis(kernels=1, findings=(kept, waived),
                                      waived=((waived, waiver),), races_flagged=0)
    text = str(diagnostics.UninitializedReadFailure("toy", diagnosis))
    assert "found 1 problem(s) in 1 interpreted kernel(s) (1 waived: pyproject.toml 1)" in text
    assert ("  waived by pyproject.toml entry 2: uninitialized-read in kernel #0 k (x.py), "
            "buffer scratch 0, at x.py:3 (k): read before written (reason: the select "
            "discards it)") in text.splitlines(), text
