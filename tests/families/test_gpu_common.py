"""families/gpu_common: how every GPU (Triton) family runs its kernel (run_program,
triton_adapter)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kernel_harness.core.backends import Backend
from kernel_harness.families import gpu_common

BACKEND = Backend(name="interpret", platform="cpu")


@dataclasses.dataclass(frozen=True)
class _Case:
    scale: float

    def static_key(self) -> tuple:
        return (self.scale,)


def _build(impl, case, interpret):  # noqa: ANN001, ANN202 - gpu_common.Build's shape
    def program(x, maybe):
        return {"out": impl(x, maybe) * case.scale}
    return program


def _impl(x, maybe):  # noqa: ANN001, ANN202
    return x if maybe is None else x + maybe


def test_inputs_go_in_order_and_outputs_come_back_float32() -> None:
    x, m = np.ones((2, 3), np.float16), np.full((2, 3), 2.0, np.float16)
    out = gpu_common.run_program(_build, ("x", "maybe"), _impl, _Case(3.0), {"x": x, "maybe": m},
                                 BACKEND)
    assert out["out"].dtype == np.float32 and (out["out"] == 9.0).all()


def test_an_optional_input_may_be_absent_a_required_one_may_not() -> None:
    x = np.ones((2,), np.float32)
    run = gpu_common.triton_adapter(kernel=_impl, impl_signature="", build=_build,
                                    names=("x", "maybe"), ops=(), optional=("maybe",)).run
    assert (run(_impl, _Case(1.0), {"x": x}, BACKEND)["out"] == 1.0).all()
    with pytest.raises(KeyError, match="maybe"):
        gpu_common.run_program(_build, ("x", "maybe"), _impl, _Case(1.0), {"x": x}, BACKEND)
