#!/usr/bin/env python3
"""tpu-inference-blockwise-quantized-matmul on interpret: standalone repro exported by `kernel-harness export-repro`.

Needs only jax, numpy and the kernel's package (not the harness). Inputs: repro.npz.
Exit 0: every output within tolerance of the float32 HIGHEST-precision reference
below; 1: an output is outside it (NaN counts as outside) or none of its elements is
compared; 2: the kernel raised.
case: {"batch_block":8,"dtype":"float32","in_block":256,"n_batch":8,"n_in":384,"n_out":256,"out_block":256,"scale_block":128,"seed":1,"w_q_dtype":"float8_e4m3fn","x_q_dtype":"float8_e4m3fn"}
"""
import os
import platform
import sys
from importlib.metadata import version
os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax
import jax.numpy as jnp
import numpy as np

"""Loading tpu-inference's kernel modules without running its package ``__init__``.

tpu-inference (vLLM's TPU backend) ships its Pallas kernels under
``tpu_inference.kernels``; importing them the ordinary way runs ``tpu_inference/__init__.py``
(which loads vLLM's engine modules) and ``tpu_inference.logger`` (which imports vLLM). A
kernel check needs neither: it is installed ``pip install --no-deps tpu-inference==0.32.0``
(its own requirements pin jax 0.11.2, torch, transformers and vLLM). :func:`kernel_module`
imports one kernel module with the two packages as plain namespaces and the logger as a
standard-library one, in one place; where tpu-inference's real package is already imported
it is used as it is. The family modules load their kernels this way when they are imported:
a process that imports such a family and later ``import tpu_inference`` gets the bare
package (import tpu-inference first where its ``__init__`` is needed).
"""


import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import logging
import sys
import types
from pathlib import Path
from typing import Any

#: The release the families were written and checked against.
TESTED_VERSION = "0.32.0"
INSTALL = f"pip install --no-deps tpu-inference=={TESTED_VERSION}"


def available() -> bool:
    """Whether tpu-inference is installed (finds it; imports nothing). A process that
    blocks the import (``sys.modules["tpu_inference"] = None``) does not have it."""
    if "tpu_inference" in sys.modules:  # imported, or prepared (prepare_packages), or blocked
        return sys.modules["tpu_inference"] is not None
    try:
        return importlib.util.find_spec("tpu_inference") is not None
    except (ImportError, ValueError):
        return False


def installed_version() -> str | None:
    """The installed tpu-inference version, or None."""
    try:
        return importlib.metadata.version("tpu-inference")
    except importlib.metadata.PackageNotFoundError:
        return None


class _Logger(logging.LoggerAdapter):
    """tpu-inference's logger methods the kernels call, on a standard logger; the ``_once``
    ones say a message once per process, as vLLM's do (the kernels warn on every call that
    the CPU is no TPU generation they have tables for)."""

    _said: set[tuple[str, tuple[Any, ...]]] = set()

    def _once(self, level: int, msg: str, *args: Any) -> None:
        if (msg, args) not in self._said:
            self._said.add((msg, args))
            self.log(level, msg, *args)

    def warning_once(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self._once(logging.WARNING, msg, *args)

    def info_once(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self._once(logging.INFO, msg, *args)


def prepare_packages() -> None:
    """``tpu_inference`` and ``tpu_inference.kernels`` as bare packages, and its logger as a
    standard one (only where the real package is not imported already): after this, its
    kernel modules import, and ``importlib.util.find_spec`` finds them, without vLLM."""
    if "tpu_inference" in sys.modules:
        return
    spec = importlib.util.find_spec("tpu_inference")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"tpu-inference is not installed ({INSTALL})")
    root = Path(next(iter(spec.submodule_search_locations)))
    for name, path in (("tpu_inference", root), ("tpu_inference.kernels", root / "kernels")):
        package = types.ModuleType(name)
        package.__path__ = [str(path)]
        # A spec of its own: importlib.util.find_spec on a module without one raises.
        package.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        package.__spec__.submodule_search_locations = [str(path)]
        sys.modules[name] = package
    logger = types.ModuleType("tpu_inference.logger")
    logger.init_logger = lambda name: _Logger(logging.getLogger(name), {})  # type: ignore[attr-defined]
    sys.modules["tpu_inference.logger"] = logger


def kernel_module(name: str) -> types.ModuleType:
    """``tpu_inference.kernels.<name>`` (``quantized_matmul.kernel``), imported without the
    package's ``__init__``; ImportError naming the install command where it is missing."""
    prepare_packages()
    return importlib.import_module(f"tpu_inference.kernels.{name}")

_K = kernel_module("quantized_matmul.blockwise_kernel")
_T = kernel_module("quantized_matmul.tuned_block_sizes")


def kernel(x, w_q, w_scale, *, block_size, x_q_dtype, batch_block, out_block,
           in_block):
    """tpu-inference's blockwise quantized_matmul_kernel with the given tiling."""
    return _K.quantized_matmul_kernel(
        x, w_q, w_scale, block_size=block_size, x_q_dtype=x_q_dtype,
        tuned_value=_T.TunedValue(batch_block, out_block, in_block))

HI = jax.lax.Precision.HIGHEST
INTERPRET = True
# The harness's fixed judge, per output (float32), from the family's table: max |kernel -
# reference| / max |reference| at most TOL, and each element's error against its own
# slice's largest reference magnitude (SLICE_AXES index the slices; FLOOR: the fraction of
# the global scale under which a slice's own is not taken) at most the same TOL. The code
# that measures and decides is the harness's own, embedded below verbatim.
TOL = {'out': 0.03}
AXES = {'out': ('row', 'dim')}
SLICE_AXES = {'out': ('row',)}
FLOOR = {'out': 0.01}
# Outputs whose reference may be non-finite inside the contract (compared by position).
NONFINITE_OK = []
# Outputs kernel-harness judges with its calibrated bound instead (the kernel's error at most
# a multiple of the same plain-jnp math's error in float32); this script applies the fixed
# table above to them, which is a different (usually looser) bound.
CALIBRATED = ['out']


def load_inputs():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'repro.npz')
    with np.load(path, allow_pickle=False) as data:
        raw = {k: data[k] for k in data.files}
    x = {k: v for k, v in raw.items() if ":" not in k}
    for k in list(x):
        if f"dtype:{k}" in raw:
            x[k] = x[k].view(getattr(jnp, str(raw[f"dtype:{k}"])))
    valid = {k[6:]: v for k, v in raw.items() if k.startswith("valid:")}
    return x, valid


# ---- kernel_harness/core/compare.py, embedded verbatim: the harness's judge ----
"""Measuring how far a kernel's output is from the reference, and the fixed bound's rules.

:func:`compare` reduces one named output to :class:`OutputStats`: max abs
error, max error relative to the output's scale, mismatch fraction, NaN/Inf
counts and the worst element by named axis. :func:`contract_problems` and
:func:`bound_problems` state what fails on those stats (the whole fixed judge);
:func:`kernel_harness.core.tolerance.judge` applies them with a family's tolerance.

This module is standalone (the standard library and numpy only): export scripts embed
its source verbatim (:mod:`kernel_harness.regression.export`), so a script judges with
this very code, not a copy of it.
"""


import dataclasses
import math

import numpy as np

#: Scales below this are treated as this: an output that is (nearly) all zero, e.g. a dq
#: whose every row sees one key, must not turn rounding noise into a huge relative error.
TINY_SCALE = 1e-6

#: Axis names that run *within* one result (a head_dim vector, a key row of a bias
#: gradient): a slice for per-slice judging spans them.
WITHIN_RESULT_AXES = frozenset({"dim", "head_dim"})


def derive_slice_axes(axes: tuple[str, ...]) -> tuple[str, ...]:
    """The axes that index independent results of an output with ``axes``: every axis
    except within-row ones (``dim``), and except ``key`` where the output also has a
    ``query`` axis (a ``[.., query, key]`` bias gradient is judged row by row)."""
    drop = set(WITHIN_RESULT_AXES)
    if "query" in axes and "key" in axes:
        drop.add("key")
    return tuple(a for a in axes if a not in drop)


def slice_layout(
    output: str, axes: tuple[str, ...], slice_axes: tuple[str, ...] | None
) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """``(slice axes, positions of the axes a slice spans)`` of an output with ``axes``;
    ``slice_axes=None`` derives them (:func:`derive_slice_axes`). An axis not in ``axes``
    is a ValueError naming the output."""
    s_axes = derive_slice_axes(axes) if slice_axes is None else tuple(slice_axes)
    unknown = set(s_axes) - set(axes)
    if unknown:
        raise ValueError(f"output {output!r}: slice axes {sorted(unknown)} not in {axes}")
    return s_axes, tuple(i for i, name in enumerate(axes) if name not in s_axes)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OutputStats:
    """Error statistics of one output (``out``, ``dq``, ...) against its reference."""

    output: str
    shape: tuple[int, ...]
    axes: tuple[str, ...]
    scale: float
    max_abs_err: float
    max_rel_err: float
    worst_index: tuple[int, ...]
    worst_actual: float
    worst_expected: float
    mismatch_threshold_rel: float
    mismatch_fraction: float
    compared: int
    nan_actual: int
    inf_actual: int
    nan_expected: int
    inf_expected: int
    #: Non-finite reference values among the compared elements, and the first one's index
    #: (whether the contract allows them is :func:`~kernel_harness.core.tolerance.judge`'s
    #: business; they are compared by position either way).
    nonfinite_expected: int = 0
    nonfinite_expected_index: tuple[int, ...] = ()
    #: Per-slice judging: the axes whose index names a slice, the floor (fraction of
    #: ``scale``) under which a slice's own scale is not taken, the worst element's error
    #: relative to its own slice's (floored) scale, that slice's index and own scale.
    slice_axes: tuple[str, ...] = ()
    slice_floor: float = 1.0
    slice_rel_err: float = 0.0
    worst_slice: tuple[int, ...] = ()
    worst_slice_scale: float = 0.0
    slice_worst_index: tuple[int, ...] = ()

    @property
    def worst_location(self) -> str:
        """The worst index by named axis, e.g. ``batch=0 head=1 query=37 dim=5``."""
        if not self.worst_index:
            return "-"
        return " ".join(f"{a}={i}" for a, i in zip(self.axes, self.worst_index, strict=True))

    @property
    def worst_slice_location(self) -> str:
        """The worst slice by named axis, e.g. ``batch=0 head=1 query=37``."""
        if not self.slice_worst_index:
            return "-"
        return " ".join(
            f"{a}={i}" for a, i in zip(self.axes, self.slice_worst_index, strict=True)
            if a in self.slice_axes
        )

    @property
    def nonfinite_expected_location(self) -> str:
        """Where the first non-finite reference value is."""
        return " ".join(
            f"{a}={i}" for a, i in zip(self.axes, self.nonfinite_expected_index, strict=True)
        ) or "-"

    @property
    def non_finite_actual(self) -> int:
        return self.nan_actual + self.inf_actual


def compare(
    actual: np.ndarray,
    expected: np.ndarray,
    *,
    output: str,
    axes: tuple[str, ...],
    valid: np.ndarray | None = None,
    mismatch_threshold_rel: float = 0.0,
    slice_axes: tuple[str, ...] | None = None,
    slice_floor: float = 1.0,
    magnitude: np.ndarray | None = None,
) -> OutputStats:
    """Measures ``actual`` against ``expected``.

    Args:
      actual: the kernel's output, any float dtype.
      expected: the reference output, same shape.
      output: the output's name, for reports.
      axes: one name per dimension (``batch``, ``head``, ``query``, ...).
      valid: optional boolean array broadcastable to the shape; elements where
        it is False are outside the family's contract and are not compared.
      mismatch_threshold_rel: an element counts as a mismatch when its error
        exceeds this fraction of the output's scale.
      slice_axes: the axes indexing independent results (default
        :func:`derive_slice_axes`); each element's error is also measured against the
        largest reference magnitude of its own slice, floored at ``slice_floor`` times
        the output's scale (so an all-but-zero slice does not turn rounding into a
        failure). ``slice_floor=1`` makes the slice measure the global one.
      magnitude: optional, same shape: the size of what each element sums (e.g. the sum
        of |terms| of a reduction that cancels); an element's scale is then the larger of
        |expected| and its magnitude, since rounding error follows the summed terms,
        not the (possibly tiny) result.

    NaN and Inf are compared by position: the same non-finite value on both sides is no
    error; anything else against a non-finite value (a kernel NaN against a reference
    -inf, a finite kernel value against a reference NaN) is an infinite error.

    Raises:
      ValueError: if shapes or axis names do not line up.
    """
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        raise ValueError(
            f"output {output!r}: kernel shape {actual.shape} != reference shape {expected.shape}"
        )
    if len(axes) != actual.ndim:
        raise ValueError(f"output {output!r}: {len(axes)} axis names for {actual.ndim} dims")
    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    mask = np.ones(a.shape, bool) if valid is None else np.broadcast_to(valid, a.shape)
    n = int(mask.sum())
    finite_e = np.isfinite(e) & mask
    abs_e = np.where(finite_e, np.abs(e), 0.0)
    if magnitude is not None:
        abs_e = np.where(finite_e, np.maximum(abs_e, np.abs(np.asarray(magnitude, float))), 0.0)
    scale = max(float(abs_e.max()) if abs_e.size else 0.0, TINY_SCALE)
    both_finite = np.isfinite(a) & np.isfinite(e)
    same_nonfinite = (np.isnan(a) & np.isnan(e)) | (np.isinf(a) & (a == e))
    with np.errstate(invalid="ignore"):
        err = np.where(both_finite, np.abs(a - e), np.where(same_nonfinite, 0.0, np.inf))
    err = np.where(mask, err, 0.0)
    bad_e = mask & ~np.isfinite(e)
    bad_e_index = tuple(int(i) for i in np.argwhere(bad_e)[0]) if bad_e.any() else ()
    if n:
        flat = int(np.argmax(err))
        worst = tuple(int(i) for i in np.unravel_index(flat, a.shape))
        max_abs = float(err[worst])
    else:
        worst, max_abs = (), 0.0
    mismatches = int(np.count_nonzero(err > mismatch_threshold_rel * scale))
    s_axes, within = slice_layout(output, tuple(axes), slice_axes)
    slice_scale = abs_e.max(axis=within, keepdims=True) if within else abs_e
    floored = np.maximum(slice_scale, max(slice_floor * scale, TINY_SCALE))
    slice_rel = err / floored
    if n:
        s_flat = int(np.argmax(slice_rel))
        s_worst = tuple(int(i) for i in np.unravel_index(s_flat, a.shape))
        s_rel = float(slice_rel[s_worst])
        s_idx = tuple(0 if d in within else i for d, i in enumerate(s_worst))
        s_scale = float(slice_scale[s_idx if within else s_worst])
        worst_slice = tuple(i for d, i in enumerate(s_worst) if d not in within)
    else:
        s_worst, s_rel, s_scale, worst_slice = (), 0.0, 0.0, ()
    return OutputStats(
        output=output,
        shape=tuple(a.shape),
        axes=tuple(axes),
        scale=scale,
        max_abs_err=max_abs,
        max_rel_err=max_abs / scale if math.isfinite(max_abs) else math.inf,
        worst_index=worst,
        worst_actual=float(a[worst]) if worst else math.nan,
        worst_expected=float(e[worst]) if worst else math.nan,
        mismatch_threshold_rel=mismatch_threshold_rel,
        mismatch_fraction=mismatches / n if n else 0.0,
        compared=n,
        nan_actual=int(np.count_nonzero(np.isnan(a) & mask)),
        inf_actual=int(np.count_nonzero(np.isinf(a) & mask)),
        nan_expected=int(np.count_nonzero(np.isnan(e) & mask)),
        inf_expected=int(np.count_nonzero(np.isinf(e) & mask)),
        nonfinite_expected=int(np.count_nonzero(bad_e)),
        nonfinite_expected_index=bad_e_index,
        slice_axes=s_axes,
        slice_floor=slice_floor,
        slice_rel_err=s_rel,
        worst_slice=worst_slice,
        worst_slice_scale=s_scale,
        slice_worst_index=s_worst,
    )


def contract_problems(stats: OutputStats, *, nonfinite_reference_ok: bool = False) -> list[str]:
    """What fails ``stats`` whatever the error bound: a non-finite reference value inside
    the contract (unless ``nonfinite_reference_ok``), zero compared elements in a
    non-empty output, any NaN/Inf the reference does not have."""
    problems: list[str] = []
    if stats.nonfinite_expected and not nonfinite_reference_ok:
        problems.append(
            f"HARNESS ERROR: the reference has {stats.nonfinite_expected} non-finite "
            f"value(s) inside the contract, first at {stats.nonfinite_expected_location}; "
            "the contract does not allow that, so the reference or the case is broken "
            "(not a kernel verdict)"
        )
    if stats.compared == 0 and math.prod(stats.shape) > 0:
        problems.append(
            "no element compared: the contract excludes the whole output, so nothing was "
            "checked"
        )
    extra_nan = stats.nan_actual - stats.nan_expected
    extra_inf = stats.inf_actual - stats.inf_expected
    if extra_nan > 0:
        problems.append(f"{extra_nan} NaN not in the reference")
    if extra_inf > 0:
        problems.append(f"{extra_inf} Inf not in the reference")
    return problems


def bound_problems(stats: OutputStats, max_rel_err: float) -> list[str]:
    """The fixed bound: the max error relative to the global scale, then relative to its
    own slice's (floored) scale, must be at most ``max_rel_err`` (NaN fails)."""
    if not stats.max_rel_err <= max_rel_err:
        return [f"max rel err {stats.max_rel_err:.3g} > tolerance {max_rel_err:.3g}"]
    if not stats.slice_rel_err <= max_rel_err:
        return [
            f"slice rel err {stats.slice_rel_err:.3g} > tolerance "
            f"{max_rel_err:.3g} in slice {stats.worst_slice_location} (its own "
            f"scale {stats.worst_slice_scale:.3g}, global {stats.scale:.3g}, floor "
            f"{stats.slice_floor:.3g} x global)"
        ]
    return []
# ---- end ----

import contextlib
import dataclasses

from jax.experimental.pallas import tpu as pltpu


def interpreting():
    """TPU interpret mode on the CPU (1 simulated core(s), zeroed scratch)."""
    if not INTERPRET:
        return contextlib.nullcontext()
    known = {f.name for f in dataclasses.fields(pltpu.InterpretParams)}
    cores = "num_cores_or_threads" if "num_cores_or_threads" in known else (
        "num_cores_per_device")
    stack = contextlib.ExitStack()
    stack.enter_context(pltpu.force_tpu_interpret_mode(pltpu.InterpretParams(
        detect_races=False, uninitialized_memory="zero", **{cores: 1})))
    return stack


def run_kernel(x):
    fn = jax.jit(lambda a, w, s: kernel(a, w, s, block_size=128,
                                        x_q_dtype=jnp.dtype('float8_e4m3fn'),
                                        batch_block=8,
                                        out_block=256,
                                        in_block=256))
    with interpreting():
        out = jax.block_until_ready(fn(x["x"], x["w_q"], x["w_scale"]))
    return dict(out=np.asarray(out, np.float32))

"""Symmetric quantization over the last axis, the one rule the quantized matmul op uses for
both operands: the harness's weights (rounded to nearest, in :mod:`.cases`) and the
reference's activations (rounded as the contract declares, in :mod:`.reference`).

``scale = max|v| / QMAX[dtype]`` in float32, ``q = R(v * (1 / scale))`` in float32 and clipped
to the dtype's range: for int8, R is truncation toward zero (``astype(int8)``) or round half
to even (``jnp.round``); for float8_e4m3fn, R is the format's own conversion (round to
nearest even; the rounding option does not apply). A group of zeros gets the inverse scale
QMAX (the kernel's ``nan_to_num(1 / 0, dtype_max)``) and quantizes to zeros.
"""


import ml_dtypes
import numpy as np

#: How a value becomes int8: truncation toward zero, or round half to even.
ROUNDINGS: tuple[str, ...] = ("toward-zero", "nearest")
#: The largest magnitude of each quantized dtype: a group's scale is max|v| / QMAX.
QMAX: dict[str, float] = {"int8": 127.0, "float8_e4m3fn": 448.0}
#: numpy storage of each quantized dtype.
STORAGE: dict[str, type] = {"int8": np.int8, "float8_e4m3fn": ml_dtypes.float8_e4m3fn}


def quantize(v: np.ndarray, dtype: str, rounding: str = "nearest"
             ) -> tuple[np.ndarray, np.ndarray]:
    """``(q, scale)``: ``q`` float64 holding the quantized values (exactly representable in
    ``dtype``) with ``v``'s shape, ``scale`` float64 with the last axis dropped."""
    if dtype not in QMAX:
        raise ValueError(f"quantized dtype must be one of {tuple(QMAX)}, got {dtype!r}")
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")
    qmax = np.float32(QMAX[dtype])
    v32 = np.asarray(v).astype(np.float32)
    scale = (np.abs(v32).max(axis=-1) / qmax).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(scale > 0, np.float32(1) / scale, qmax).astype(np.float32)
    scaled = (v32 * inv[..., None]).astype(np.float32)
    if dtype == "int8":
        q = np.trunc(scaled) if rounding == "toward-zero" else np.rint(scaled)
        q = np.clip(q, -128, 127)
    else:
        q = np.clip(scaled, -qmax, qmax).astype(STORAGE[dtype]).astype(np.float64)
    return q.astype(np.float64), scale.astype(np.float64)


def stored(q: np.ndarray, dtype: str) -> np.ndarray:
    """Quantized values (from :func:`quantize`) in the dtype's numpy storage."""
    return np.asarray(q).astype(STORAGE[dtype])

from typing import Any

QmmCase = Any

def grouped_operands(case: QmmCase, inputs: dict[str, np.ndarray], rounding: str
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(x_q [b, g, k], x_scale [b, g], w_q [o, g, k], w_scale [o, g])`` in float64: x
    quantized per group by ``rounding`` (or x itself with scale 1), the weights' values
    and their scales per output channel and group."""
    g, k = case.n_in // case.group, case.group
    x = np.asarray(inputs["x"]).astype(np.float32).reshape(case.n_batch, g, k)
    if case.x_q_dtype == "none":
        x_q, x_scale = x.astype(np.float64), np.ones((case.n_batch, g))
    else:
        x_q, x_scale = quantize(x, case.x_q_dtype, rounding)
    w_q = np.asarray(inputs["w_q"]).astype(np.float64).reshape(case.n_out, g, k)
    w_scale = np.asarray(inputs["w_scale"], np.float64)
    w_scale = w_scale[:, None] if case.scale_block is None else w_scale[:, 0, :].T
    return x_q, x_scale, w_q, w_scale


def exact_product(case: QmmCase, inputs: dict[str, np.ndarray], rounding: str
                  ) -> np.ndarray:
    """``out`` [n_batch, n_out] in float64: each group's exact product of quantized values,
    scaled by the group's x and w scales, summed over the groups."""
    x_q, x_scale, w_q, w_scale = grouped_operands(case, inputs, rounding)
    partial = np.einsum("bgk,ogk->bgo", x_q, w_q)
    return (partial * x_scale[:, :, None] * w_scale.T[None]).sum(axis=1)



import types

CASE = types.SimpleNamespace(**{'n_batch': 8, 'n_in': 384, 'n_out': 256, 'group': 128, 'x_q_dtype': 'float8_e4m3fn', 'w_q_dtype': 'float8_e4m3fn', 'scale_block': 128})


def reference(x):
    """The exact product, x quantized per group (nearest for int8)."""
    return dict(out=exact_product(CASE, x, 'nearest').astype(np.float32))


def judge_output(name, got, want, valid):
    """The harness's fixed verdict on one output: (stats, problems)."""
    stats = compare(
        np.asarray(got[name], np.float32), np.asarray(want[name], np.float32), output=name,
        axes=AXES[name], valid=valid.get(name), mismatch_threshold_rel=TOL[name],
        slice_axes=SLICE_AXES[name], slice_floor=FLOOR[name],
        magnitude=want.get(f"{name}:magnitude"))
    problems = contract_problems(stats, nonfinite_reference_ok=name in NONFINITE_OK)
    return stats, problems + bound_problems(stats, TOL[name])


def main():
    print(f"python {platform.python_version()}  jax {jax.__version__}  "
          f"jaxlib {version('jaxlib')}  numpy {np.__version__}  "
          f"backend {jax.default_backend()}  interpret={INTERPRET}")
    x, valid = load_inputs()
    got, want = run_kernel(x), reference(x)
    failed = False
    for name, tol in TOL.items():
        s, problems = judge_output(name, got, want, valid)
        failed |= bool(problems)
        print(f"{'FAIL' if problems else 'ok  '} {name:<6} max rel err {s.max_rel_err:.3g}, in "
              f"its own slice {s.slice_rel_err:.3g} (tol {tol:g}) non-finite "
              f"{s.non_finite_actual} compared {s.compared}  worst at {s.worst_location}: "
              f"{s.worst_actual:.6g} vs {s.worst_expected:.6g}"
              + ("  [kernel-harness: calibrated judge]" if name in CALIBRATED else ""))
        for problem in problems:
            print(f"       {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        status = main()
    except Exception:  # the kernel (or this script) raised: neither within nor outside
        import traceback
        traceback.print_exc()
        status = 2
    sys.exit(status)
