"""Crash reports: the implementation's own frames, the kind, and who raised."""

from kernel_harness.core.backends import resolve_backend
from kernel_harness.run.crash import Crash, crash_kind, own_frames, raised_in_implementation
from tests.helpers.toy_family import ToyCase


def _raise_here():
    raise ValueError("bad\nsecond line")


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return e
    raise AssertionError("did not raise")


def test_kind_and_frames_name_the_implementation_line():
    err = _error(_raise_here)
    assert own_frames(err)[-1].name == "_raise_here"
    assert crash_kind(err).startswith("ValueError at test_crash.py:")
    assert raised_in_implementation(err)


def test_report_is_one_line_summary_frames_and_repro():
    case = ToyCase(dtype="float32", seed=3, length=4)
    crash = Crash(family="toy", case=case, backend=resolve_backend("interpret"),
                  impl="m:f", impl_spec="m:f", adjustments=("--tolerance", "y=0.1"),
                  error=_error(_raise_here))
    text = crash.report()
    first = text.splitlines()[0]
    assert first == ("[kernel-harness] CRASH toy float32 x=(4,) backend=interpret: "
                     "ValueError: bad")
    assert "in _raise_here" in text
    assert text.splitlines()[-1].startswith("  reproduce: kernel-harness repro toy")
    assert text.endswith("--impl m:f --tolerance y=0.1")


def test_error_raised_only_in_jax_is_not_blamed_on_the_implementation():
    import jax.numpy as jnp

    err = _error(lambda: jnp.zeros((2,)) + jnp.zeros((3,)))
    # The lambda above is this test file (not harness code), so it counts as "own";
    # a traceback with no such frame is flagged as outside the implementation.
    err.__traceback__ = err.__traceback__.tb_next  # drop this file's frame
    while err.__traceback__ is not None and "test_crash" in \
            err.__traceback__.tb_frame.f_code.co_filename:
        err.__traceback__ = err.__traceback__.tb_next
    assert not raised_in_implementation(err)


def _without_this_file(err):
    while err.__traceback__ is not None and "test_crash" in \
            err.__traceback__.tb_frame.f_code.co_filename:
        err.__traceback__ = err.__traceback__.tb_next
    return err


def test_an_error_the_harness_raised_anywhere_in_its_package_is_not_the_implementations():
    """A frame in any harness module (here spec/adapter.py, an adapter's shape check) is
    plumbing: the report says the error was raised outside the implementation's code, never
    points at the harness as if it were the user's kernel (issue 56)."""
    import numpy as np

    from kernel_harness.records.adapter import expect_shape

    err = _without_this_file(_error(lambda: expect_shape("toy", np.zeros(2), (3,))))
    assert err.__traceback__ is not None
    assert not raised_in_implementation(err)


def test_the_harness_own_kernels_are_implementations():
    import kernel_harness.kernels.all_gather_ring as ring
    import kernel_harness.records.adapter as adapter
    from kernel_harness.run.crash import is_own_frame

    assert is_own_frame(ring.__file__) and not is_own_frame(adapter.__file__)
    assert is_own_frame(__file__)  # a user's module


def test_a_crash_under_the_harness_forced_interpret_mode_says_so():
    """Issue 56 item 2: a kernel jax's TPU interpreter cannot run under the settings the
    harness forces (flywheel's decode: an AttributeError inside jax) names that mode, who
    chose it and the way out; a crash outside it does not."""
    backend = resolve_backend("interpret")
    case = ToyCase(dtype="float32", seed=3, length=4)

    def under_forced_mode():
        with backend.forcing_interpret():
            _raise_here()

    crash = Crash(family="toy", case=case, backend=backend, impl="m:f", impl_spec=None,
                  adjustments=(), error=_error(under_forced_mode))
    assert "ran under TPU interpret mode forced by the harness" in crash.report()
    assert "uninitialized_memory='zero'" in crash.report()
    plain = Crash(family="toy", case=case, backend=backend, impl="m:f", impl_spec=None,
                  adjustments=(), error=_error(_raise_here))
    assert "forced by the harness" not in plain.report()
