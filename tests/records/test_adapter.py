"""spec/adapter.py: an adapter's ``run`` made from its ``traceable`` (one mapping of inputs to
the kernel's program), and the shape check of what a kernel returned."""

from __future__ import annotations

import contextlib

import jax
import numpy as np
import pytest

from kernel_harness import resolve_backend
from kernel_harness.records.adapter import expect_shape, traced_run
from kernel_harness.records.registry import get_family
from tests.helpers.golden_export import first_golden_case
from tests.helpers.per_push import per_push

BACKEND = resolve_backend("interpret")


def test_traced_run_places_the_inputs_calls_inside_the_context_and_returns_float32():
    seen: dict = {}

    @contextlib.contextmanager
    def context(case, backend):
        seen["context"] = (case, backend.name)
        seen["inside"] = True
        yield
        seen["inside"] = False

    def traceable(impl, case, backend):
        seen["impl"] = impl

        def f(inputs):
            seen["placed"] = {n: (isinstance(x, jax.Array), x.devices())
                              for n, x in inputs.items()}
            assert seen["inside"]
            return {"out": impl(inputs["x"]), "half": (inputs["x"] / 2).astype("bfloat16")}

        return f

    run = traced_run(traceable, context=context)
    outputs = run(lambda x: x * 3, "the case", {"x": np.arange(4, dtype=np.int32)}, BACKEND)
    assert seen["context"] == ("the case", "interpret") and seen["inside"] is False
    assert seen["placed"] == {"x": (True, {BACKEND.device})}
    assert {n: x.dtype for n, x in outputs.items()} == {"out": np.float32, "half": np.float32}
    assert all(isinstance(x, np.ndarray) for x in outputs.values())
    np.testing.assert_array_equal(outputs["out"], [0, 3, 6, 9])


@pytest.mark.parametrize("family", per_push(["flash", "sdpa", "splash", "megablox-gmm"]))
def test_a_family_run_is_its_traceable_on_placed_inputs(family: str) -> None:
    """Adapters built with traced_run (tpu-paged's too, inside its interpreter context): what
    the check judges is what TPU lowering and sharded runs trace (the same program on the
    same arguments)."""
    fam = get_family(family)
    case = first_golden_case(family)
    inputs = case.materialize()
    ran = fam.run(fam.kernel, case, inputs, BACKEND)
    f = fam.metamorphic.traceable(None, case, BACKEND)
    traced = jax.block_until_ready(f(inputs))
    assert set(ran) == set(traced)
    for name, value in traced.items():
        np.testing.assert_array_equal(ran[name], np.asarray(value, np.float32), err_msg=name)


def test_expect_shape_names_the_family_and_both_shapes():
    expect_shape("fam", np.zeros((2, 3)), (2, 3))
    with pytest.raises(ValueError, match=r"fam: the kernel returned shape \(2, 3\), expected "
                                         r"\(3, 2\)"):
        expect_shape("fam", np.zeros((2, 3)), (3, 2))


def test_a_jitted_tpu_program_runs_its_traceable_and_checks_what_comes_back():
    import dataclasses

    from kernel_harness.records.adapter import JittedTpuProgram

    @dataclasses.dataclass(frozen=True)
    class Toy:
        n: int = 4

        def static_key(self):
            return (("n", self.n),)

    def kernel(x, *, times):
        return x * times, x.sum()

    program = JittedTpuProgram(
        family="toy", kernel=kernel, operands=lambda case: ("x",),
        options=lambda fields, interpreted: {"times": 3}, outputs=("y", "total"),
        shapes=lambda case, inputs: [(case.n,), ()])
    inputs = {"x": np.arange(4, dtype=np.float32), "unused": np.zeros(2, np.int32)}
    got = program.run(kernel, Toy(), inputs, BACKEND)
    np.testing.assert_array_equal(got["y"], [0, 3, 6, 9])
    assert got["total"] == 6 and got["y"].dtype == np.float32
    with pytest.raises(ValueError, match=r"toy \(y\): the kernel returned shape \(4,\), "
                                         r"expected \(5,\)"):
        program.run(kernel, Toy(n=5), inputs, BACKEND)
    with pytest.raises(ValueError, match="returned 3 results, expected 2"):
        program.run(lambda x, *, times: (x, x, x), Toy(), inputs, BACKEND)
