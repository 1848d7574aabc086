"""A tiny, fast family (plain jnp "kernel") for testing the runner, report and CLI.

Not registered by default: tests add it to the registry with monkeypatch.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import Case, standard_normal
from kernel_harness.core.tolerance import (
    FLOAT32_FLOOR,
    FLOAT32_GRADIENT_FLOOR,
    Tolerance,
    ToleranceTable,
)
from kernel_harness.records.family import Family


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToyCase(Case):
    length: int

    def shape_summary(self) -> str:
        return f"x=({self.length},)"

    def materialize(self) -> dict[str, np.ndarray]:
        rng = self.rng()
        return {
            "x": standard_normal(rng, (self.length,), self.dtype),
            "dy": standard_normal(rng, (self.length,), self.dtype),
        }


def softplus(x):
    """The toy kernel: softplus, elementwise."""
    return jnp.logaddexp(x, 0.0)


def wrong_softplus(x):
    """A planted bug: wrong for the last element only."""
    return softplus(x).at[-1].multiply(1.01)


def _run(impl, case, inputs, backend):
    y, vjp = jax.vjp(impl, jnp.asarray(inputs["x"]))
    (dx,) = vjp(jnp.asarray(inputs["dy"]))
    return {"y": np.asarray(y, np.float32), "dx": np.asarray(dx, np.float32)}


def _reference(case, inputs):
    x = np.asarray(inputs["x"], np.float64)
    return {"y": np.logaddexp(x, 0.0), "dx": inputs["dy"].astype(np.float64) / (1 + np.exp(-x))}


FAMILY = Family(
    name="toy",
    summary="softplus, for testing the harness itself",
    case_type=ToyCase,
    cases=lambda: st.builds(
        ToyCase,
        dtype=st.just("float32"),
        seed=st.integers(0, 2**16),
        length=st.sampled_from([4, 8]),
    ),
    kernel=softplus,
    impl_signature="f(x) -> y",
    run=_run,
    reference=_reference,
    output_axes={"y": ("index",), "dx": ("index",)},
    tolerances=ToleranceTable(
        {
            ("float32", "y"): Tolerance(max_rel_err=1e-5, slice_floor=FLOAT32_FLOOR),
            ("float32", "dx"): Tolerance(max_rel_err=1e-5, slice_floor=FLOAT32_GRADIENT_FLOOR),
        }
    ),
    capabilities=frozenset({"gradients"}),
    backends=frozenset({"interpret"}),
    events=lambda case: [f"length={case.length}"],
)
