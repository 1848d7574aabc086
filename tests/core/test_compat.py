"""compat: an unrecognized TPU-interpreter layout is a loud error naming the jax version and
the missing piece, never a KeyError and never a run without race detection."""

from __future__ import annotations

import contextlib

import jax
import pytest

from kernel_harness.core import compat
from kernel_harness.run import diagnostics


def test_both_known_layouts_are_recognized():
    layout = compat.interpreter_layout()
    expected = "thread" if compat.JAX_VERSION >= (0, 12) else "device-core"
    assert layout.check_style == expected


def test_unknown_check_signature_names_jax_version_and_method(monkeypatch):
    state_cls = compat.interpreter_layout().state_cls
    monkeypatch.setattr(state_cls, "check_read", lambda self, who, when, key, where: None)
    with pytest.raises(compat.InterpreterLayoutError) as err:
        with compat.recording_tpu_interpret():
            pass
    text = str(err.value)
    assert f"jax {jax.__version__}" in text and "RaceDetectionState.check_read" in text


def test_missing_allocate_buffer_is_named(monkeypatch):
    from jax._src.pallas.mosaic.interpret import shared_memory as shm

    class Bare:
        mem: dict = {}

    monkeypatch.setattr(shm, "SharedMemory", Bare)
    with pytest.raises(compat.InterpreterLayoutError, match="allocate_buffer"):
        compat.interpreter_layout()


def test_patches_are_removed_after_recording():
    layout = compat.interpreter_layout()
    before = {n: layout.state_cls.__dict__.get(n) for n in ("check_read", "check_write")}
    alloc_own = "allocate_buffer" in layout.mem_cls.__dict__
    with compat.recording_tpu_interpret():
        assert layout.state_cls.__dict__["check_read"] is not before["check_read"]
    assert {n: layout.state_cls.__dict__.get(n) for n in before} == before
    assert ("allocate_buffer" in layout.mem_cls.__dict__) == alloc_own


def test_interpreted_kernels_with_no_recorded_access_are_an_error(monkeypatch):
    @contextlib.contextmanager
    def silent():
        log = compat.TpuInterpretLog()
        yield log
        log.kernels = 1  # a kernel ran, the detector saw nothing: race detection was off

    monkeypatch.setattr(compat, "recording_tpu_interpret", silent)
    with pytest.raises(compat.InterpreterLayoutError, match="race detection did not run"):
        diagnostics.diagnosed_run("planted", lambda: None, waivers=())
