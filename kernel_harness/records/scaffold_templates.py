"""The text of ``kernel-harness init``'s files (:mod:`string.Template`: ``$name`` is the
family, ``$package`` its package, ``$module``/``$func`` the kernel, ``$todo`` the marker,
``$setuptools`` the tables saying what the distribution ships, ``$dependency_note`` where
the kernel's module comes from; in ``FAMILY``, ``$interpret_sig``, ``$interpret_arg`` and
``$run_call`` call a kernel with ``interpret=`` (:data:`INTERPRET`) or without it
(:data:`NO_INTERPRET`))."""

#: ``FAMILY``'s substitutions for a kernel that takes ``interpret=``.
INTERPRET = {"interpret_sig": ", *, interpret", "interpret_arg": ", interpret=interpret",
             "run_call": "    y, dx = jax.block_until_ready(fn(x, dy))"}

#: The same for a kernel without ``interpret=``: Pallas's TPU interpret mode off a TPU.
NO_INTERPRET = {"interpret_sig": "", "interpret_arg": "", "run_call": """\
    # $todo your kernel takes no interpret=: off a TPU it is
    # traced in Pallas's TPU interpret mode; drop the context if it picks its own
    # (kernel_harness.current_backend()).
    with backend.forcing_interpret():
        y, dx = jax.block_until_ready(fn(x, dy))"""}

PYPROJECT = '''\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "$name-family"
version = "0.1.0"
description = "The kernel-harness family $name: checks $kernel against its reference."
requires-python = ">=3.11"
$dependency_note
dependencies = ["kernel-harness"]

# Installed (pip install .), the family is found through this entry point.
[project.entry-points."$group"]
$name = "$package.family:FAMILY"

$setuptools

# Not installed, `kernel-harness check $name` run in this folder (or below it) finds the
# family through this table; golden-dir is where `kernel-harness golden` and `gate` keep
# the family's goldens and baseline.
[tool.kernel-harness]
family-modules = ["$package.family"]
golden-dir = "golden"

# The tests import the package from this folder without installing it.
[tool.pytest.ini_options]
pythonpath = ["."]
'''

GITIGNORE = '''\
# Hypothesis's example database, build outputs and caches: not to commit.
.hypothesis/
__pycache__/
*.egg-info/
build/
dist/
.pytest_cache/
'''

INIT = '''\
"""The kernel-harness family $name.

``cases`` (the case description and strategy), ``reference`` (the independent
reference) and ``family`` (``FAMILY``), which checks:
$kernel
"""
'''

CASES = '''\
"""The $name case description and the Hypothesis strategy that draws it."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st
from kernel_harness import Case

# $todo the shapes your kernel takes.
# Few static shapes: each one compiles once.
ROWS = (8, 16)
DIMS = (128, 256)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ${camel}Case(Case):
    """One example: x [rows, dim] and the output cotangent dy, from the seed."""

    # $todo your kernel's parameters as fields (shapes, flags, blocks):
    # only primitives and tuples, so a failing case prints as one JSON line.

    rows: int
    dim: int

    def shape_summary(self) -> str:
        """``x=(rows,dim)`` for failure lines."""
        return f"x=({self.rows},{self.dim})"

    def materialize(self) -> dict[str, np.ndarray]:
        """The inputs, rounded to the case's dtype (the reference sees them rounded)."""
        import jax.numpy as jnp

        rng = self.rng()

        def rounded(a: np.ndarray) -> np.ndarray:
            return np.asarray(jnp.asarray(a, jnp.float32).astype(self.dtype))

        # $todo your kernel's inputs,
        # with the value ranges that reach its hard paths.
        return {
            "x": rounded(rng.standard_normal((self.rows, self.dim))),
            "dy": rounded(rng.standard_normal((self.rows, self.dim))),
        }


@st.composite
def ${package}_cases(draw: st.DrawFn) -> ${camel}Case:
    """Rows, row lengths and dtypes."""
    # $todo draw what your cases must reach.
    return ${camel}Case(
        dtype=draw(st.sampled_from(["float32", "bfloat16"])),
        seed=draw(st.integers(0, 2**16)),
        rows=draw(st.sampled_from(ROWS)),
        dim=draw(st.sampled_from(DIMS)),
    )
'''

REFERENCE = '''\
"""The independent reference of $name.

Plain jnp at float32, gradients by autodiff of the plain formula (never by calling
the kernel)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def _formula(x: jax.Array) -> jax.Array:
    # $todo your kernel's math.
    # This placeholder is the placeholder kernel's y = 2 * x + 1.
    return 2.0 * x + 1.0


def reference(case, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``y`` and ``dx`` (the vjp with cotangent ``dy``) at float32."""
    x, dy = (jnp.asarray(inputs[n], jnp.float32) for n in ("x", "dy"))
    y, vjp = jax.vjp(_formula, x)
    (dx,) = vjp(dy)
    return {"y": np.asarray(y), "dx": np.asarray(dx)}
'''

FAMILY = '''\
"""``FAMILY``: $kernel as a kernel-harness family named ``$name``.

Found by the harness through the ``$group`` entry point (installed) or
``family-modules`` in this folder's pyproject.toml; ``kernel-harness describe $name``
prints the contract below.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from kernel_harness import Backend, Family, Tolerance, ToleranceTable, standard_floor

from $package import cases, reference
from $module import $func as kernel

# $todo how your kernel is called, for `describe` and `--impl`.
IMPL_SIGNATURE = (
    "impl(x$interpret_sig) -> y; x [rows, dim]; differentiable in x (jax.vjp)"
)

# $todo tolerances measured for your kernel, each with its reason, and the per-slice floor
# of each output (standard_floor: the shared ones; gradient=True for a gradient whose rows
# sum rounded products; a SliceFloor of your own where an output's slices sum only their
# own terms).
_F32 = dict(max_rel_err=1e-6, reason="float32 throughout")
_BF16 = dict(max_rel_err=1e-2, reason="one bfloat16 rounding of the output")
TOLERANCES = ToleranceTable(
    {(d, o): Tolerance(**t, slice_floor=standard_floor(d, gradient=o == "dx"))
     for d, t in (("float32", _F32), ("bfloat16", _BF16)) for o in ("y", "dx")}
)


@functools.lru_cache(maxsize=64)
def _compiled(impl: Any, interpret: Any) -> Any:
    def forward_and_vjp(x, dy):
        # $todo call your kernel with its parameters
        # (from the case, through _compiled's arguments: hashable ones).
        y, vjp = jax.vjp(lambda x: impl(x$interpret_arg), x)
        (dx,) = vjp(dy.astype(y.dtype))
        return y, dx

    return jax.jit(forward_and_vjp)


def run(
    impl: Any,
    case: cases.${camel}Case,
    inputs: dict[str, np.ndarray],
    backend: Backend,
) -> dict[str, np.ndarray]:
    """Runs ``impl`` on ``backend``: ``y`` and the vjp gradient ``dx`` (float32)."""
    put = functools.partial(jax.device_put, device=backend.device)
    x, dy = (put(jnp.asarray(inputs[n])) for n in ("x", "dy"))
    fn = _compiled(impl, backend.pallas_interpret())
$run_call
    return {"y": np.asarray(y, np.float32), "dx": np.asarray(dx, np.float32)}


def events(case: cases.${camel}Case) -> list[str]:
    """What a case reaches, counted in the check's summary."""
    # $todo labels for your kernel's hard paths.
    return [case.dtype, f"rows:{case.rows}"]


FAMILY = Family(
    name="$name",
    # $todo one line saying what your kernel computes.
    summary="$kernel",
    case_type=cases.${camel}Case,
    cases=cases.${package}_cases,
    kernel=kernel,
    impl_signature=IMPL_SIGNATURE,
    run=run,
    reference=reference.reference,
    # $todo your outputs' axis names. They say how the judge slices an output: "dim"
    # (or "head_dim") runs within one result, every other axis indexes independent
    # results, so here a slice is one row, judged against its own scale as well.
    output_axes={"y": ("row", "dim"), "dx": ("row", "dim")},
    tolerances=TOLERANCES,
    capabilities=frozenset({"gradients"}),
    # $todo the backends your kernel runs on:
    # interpret, tpu-interpret, tpu, gpu.
    backends=frozenset({"interpret"}),
    events=events,
    # $todo the kernel's semantic choices, in words
    # (what is compared, edge cases).
    contract="y = 2 * x + 1 elementwise; every element of y and dx is compared.",
)
'''

TEST = '''\
"""Tests of the $name family: its reference on a case computed by hand,
and the harness's check of the kernel against it."""

from __future__ import annotations

import kernel_harness.testing
import numpy as np

from $package.cases import ${camel}Case
from $package.family import FAMILY
from $package.reference import reference


def test_the_reference_on_a_case_computed_by_hand():
    case = ${camel}Case(dtype="float32", seed=0, rows=8, dim=128)
    inputs = case.materialize()
    got = reference(case, inputs)
    # $todo your kernel's math, computed another way
    # (numpy at float64, a closed form).
    x, dy = (inputs[n].astype(np.float64) for n in ("x", "dy"))
    np.testing.assert_allclose(got["y"], 2 * x + 1, rtol=1e-6)
    np.testing.assert_allclose(got["dx"], 2 * dy, rtol=1e-6)


def test_the_kernel_matches_the_reference():
    """Every property of the harness (an AssertionError carrying its report if not)."""
    kernel_harness.testing.check(FAMILY, profile="dev")
'''

KERNEL = '''\
"""A placeholder Pallas kernel written by `kernel-harness init`.

y = 2 * x + 1 per element, with a Pallas backward (dx = 2 * dy) through
jax.custom_vjp.

$todo replace it with your kernel (and reference.py with its math)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _forward_kernel(x_ref, y_ref):
    y_ref[...] = (x_ref[...].astype(jnp.float32) * 2.0 + 1.0).astype(y_ref.dtype)


def _backward_kernel(dy_ref, dx_ref):
    dx_ref[...] = (dy_ref[...].astype(jnp.float32) * 2.0).astype(dx_ref.dtype)


def _call(kernel, x, interpret):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          interpret=interpret)(x)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _$func(x, interpret):
    return _call(_forward_kernel, x, interpret)


def _fwd(x, interpret):
    return _call(_forward_kernel, x, interpret), None


def _bwd(interpret, _, dy):
    return (_call(_backward_kernel, dy, interpret),)


_$func.defvjp(_fwd, _bwd)


def $func(x: jax.Array, *, interpret: bool = False) -> jax.Array:
    """y = 2 * x + 1, elementwise; differentiable in x (custom VJP)."""
    return _$func(x, interpret)
'''
