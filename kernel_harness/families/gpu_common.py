"""Helpers shared by the GPU (Triton-lowered Pallas) families: gpu-mha, gpu-decode, gpu-paged,
gpu-norm and gpu-softmax.

The GPU kernels take ``interpret=`` directly, so they run on two backends:
``interpret`` (the generic Pallas interpreter on CPU, whose out-of-bounds block
padding is NaN, so stray reads show up) and ``gpu`` (compiled through Triton).

The kernels are jax's Pallas Triton ops, which jax 0.12.1 removed
(:mod:`kernel_harness.core.compat.gpu_ops`): each family looks its modules up with
:func:`triton_op`, so it imports on any jax, and has no backend (:func:`triton_backends`)
where they are missing, its ``requires`` saying why (:func:`triton_requires`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.core.case import Case, check_logit_scale
from kernel_harness.core.compat import gpu_ops
from kernel_harness.core.tolerance import ToleranceTable
from kernel_harness.records.adapter import Adapter

#: Backends a GPU family can run on.
GPU_BACKENDS: frozenset[str] = frozenset({"interpret", "gpu"})


class MissingTritonOp:
    """Stands in for a Pallas Triton op module this jax lacks: each attribute is a function
    that raises ImportError saying why (a family module binds ``module.fn`` on any jax; the
    family has no backend there, so the harness never calls it)."""

    def __init__(self, name: str):
        self.name = name

    def __getattr__(self, attr: str) -> Callable[..., Any]:
        if attr.startswith("__"):
            raise AttributeError(attr)
        name = self.name

        def missing(*args: Any, **kwargs: Any) -> Any:
            raise ImportError(f"{gpu_ops.PACKAGE}.{name}.{attr} needs "
                              f"{gpu_ops.gpu_ops_missing_reason((name,))}")

        # Named as the function it stands for, where a report names the implementation.
        missing.__module__, missing.__qualname__ = f"{gpu_ops.PACKAGE}.{name}", attr
        missing.__name__ = attr
        return missing


def triton_op(name: str) -> Any:
    """jax's Pallas Triton op module ``name`` (``"softmax"``; imported, so under
    ``kernel-harness mutate`` the mutated copy), or a :class:`MissingTritonOp` where this jax
    has none (:func:`~kernel_harness.core.compat.gpu_ops.gpu_op`)."""
    module = gpu_ops.gpu_op(name)
    return MissingTritonOp(name) if module is None else module


def triton_backends(ops: Sequence[str]) -> frozenset[str]:
    """:data:`GPU_BACKENDS` where this jax has every op module of ``ops``, else none."""
    return frozenset() if gpu_ops.missing_gpu_ops(tuple(ops)) else GPU_BACKENDS


def triton_requires(ops: Sequence[str]) -> str:
    """A GPU family's ``Family.requires``: the jax with its op modules ``ops``; where this jax
    lacks them, why and what to install (``kernel-harness list``: ``- (needs ...)``)."""
    if gpu_ops.missing_gpu_ops(tuple(ops)):
        return gpu_ops.gpu_ops_missing_reason(tuple(ops))
    modules = ", ".join(f"{gpu_ops.PACKAGE}.{op}" for op in ops)
    return (f"jax <= {gpu_ops.LAST_JAX_WITH_TRITON_OPS} with {modules} (jax 0.12.1 removed "
            "its Pallas Triton ops)")


#: Block sizes a Triton tile may take (powers of two, at least 16 for ``tl.dot``).
TILE_SIZES: tuple[int, ...] = (16, 32, 64, 128)

#: The note every GPU family's float32 tolerances carry.
F32_DOT_NOTE = (
    "kernels are traced under jax.default_matmul_precision('highest'), so on --backend gpu "
    "Triton's float32 dots use IEEE fp32 instead of their TF32 default; TF32's 10-bit "
    "mantissa would need a bound near 1e-3 or more (estimate, not measured: no GPU run yet) "
    "and could no longer tell a bf16 PV product (~3e-3) from a correct kernel"
)

#: The reason of a GPU attention family's float32 limits.
F32_REASON = f"float32 end to end; interpret worst seen ~1e-6; {F32_DOT_NOTE}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class TritonCase(Case):
    """What the cases of the Triton kernels share (gpu-mha, gpu-decode, gpu-paged).

    Attributes:
      logit_scale: multiple of the O(1) logit scale (q is drawn so that the logits are
        ~N(0, logit_scale**2)); see :data:`~kernel_harness.core.case.LOGIT_SCALES`.
      num_warps, num_stages: Triton launch settings (accepted but unused in interpret mode).
    """

    logit_scale: float = 1.0
    num_warps: int | None = None
    num_stages: int = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        check_logit_scale(self.logit_scale)


def is_pow2(n: int) -> bool:
    """Whether ``n`` is a positive power of two."""
    return n > 0 and n & (n - 1) == 0


@contextlib.contextmanager
def kernel_context(backend: Backend) -> Iterator[None]:
    """The context a GPU kernel is traced in on every backend: highest matmul precision,
    which on ``gpu`` means IEEE fp32 Triton dots (see :data:`F32_DOT_NOTE`)."""
    with jax.default_matmul_precision("highest"):
        yield


#: XLA options for CPU-side programs (interpreted kernels, references): LLVM's backend
#: optimizations roughly double compile time, and each case runs its program only once.
CPU_COMPILER_OPTIONS: dict[str, Any] = {"xla_backend_optimization_level": 0}


def jit(fn: Callable[..., Any], *, cpu: bool) -> Callable[..., Any]:
    """``jax.jit(fn)``; a program that runs on CPU is compiled without backend optimization."""
    return jax.jit(fn, compiler_options=CPU_COMPILER_OPTIONS if cpu else None)


_PROGRAMS: dict[tuple[Any, ...], Callable[..., Any]] = {}
_MAX_PROGRAMS = 256


def cached_program(
    impl: Callable[..., Any], case: Any, backend: Backend,
    build: Callable[[Callable[..., Any], Any, Any], Callable[..., Any]],
) -> Callable[..., Any]:
    """``build(impl, case, interpret)``, once per (impl, static configuration, backend)."""
    key = (impl, type(case).__name__, case.static_key(), backend.name)
    if key not in _PROGRAMS:
        if len(_PROGRAMS) >= _MAX_PROGRAMS:
            _PROGRAMS.pop(next(iter(_PROGRAMS)))
        _PROGRAMS[key] = build(impl, case, backend.pallas_interpret())
    return _PROGRAMS[key]


def case_options(case: Any, *names: str, **more: Any) -> dict[str, Any]:
    """The kernel's keyword arguments: the case's fields called ``names`` (the kernel
    spells them as the case does), then ``more``."""
    return {**{name: getattr(case, name) for name in names}, **more}


def put(arrays: Mapping[str, np.ndarray | None], backend: Backend) -> dict[str, jax.Array | None]:
    """Places the case's arrays on the backend's device (``None`` stays ``None``)."""
    device = backend.device
    return {k: None if v is None else jax.device_put(v, device) for k, v in arrays.items()}


def to_numpy(outputs: Mapping[str, jax.Array]) -> dict[str, np.ndarray]:
    """Device outputs as float32 numpy arrays (exact for every input dtype)."""
    return {k: np.asarray(jax.device_get(v)).astype(np.float32) for k, v in outputs.items()}


#: ``build(impl, case, interpret)``: a family's jitted program of ``impl`` for the case's static
#: configuration, taking the inputs positionally and returning ``{output: array}``.
Build = Callable[[Callable[..., Any], Any, Any], Callable[..., Any]]


def run_program(build: Build, names: Sequence[str], impl: Callable[..., Any],
                case: Any, inputs: Mapping[str, np.ndarray], backend: Backend, *,
                optional: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """Runs ``impl`` on ``backend`` (one the family supports: the runner checks it first,
    :func:`~kernel_harness.run.runner.ensure_supported`) as every GPU family does: the inputs
    ``names`` placed on its device and passed in that order to ``build``'s program
    (:func:`cached_program`), called in :func:`kernel_context`; the outputs as float32 numpy
    arrays. A name in ``optional`` a case does not give is passed as ``None``; any other
    missing input is a KeyError naming it."""
    arrays = put({name: inputs.get(name) if name in optional else inputs[name]
                  for name in names}, backend)
    with kernel_context(backend):
        outs = cached_program(impl, case, backend, build)(*(arrays[name] for name in names))
    return to_numpy(outs)


def triton_adapter(*, kernel: Callable[..., Any], impl_signature: str, build: Build,
                   names: Sequence[str], ops: Sequence[str],
                   optional: Sequence[str] = ()) -> Adapter:
    """How a GPU family calls its kernel: ``run`` is :func:`run_program` of ``build`` on the
    inputs ``names`` (those in ``optional`` may be absent), on the GPU backends where this jax
    has the op modules ``ops`` (:func:`triton_backends`), on none where it lacks them."""
    def run(impl: Callable[..., Any], case: Any, inputs: Mapping[str, np.ndarray],
            backend: Backend) -> dict[str, np.ndarray]:
        return run_program(build, names, impl, case, inputs, backend, optional=optional)

    return Adapter(kernel=kernel, impl_signature=impl_signature, run=run,
                   backends=triton_backends(ops))


def tolerance_table(
    table: Mapping[str, Mapping[str, float]], *, low_reason: str, lse_reason: str,
    gradients: frozenset[str] = frozenset(),
) -> ToleranceTable:
    """A GPU family's tolerances from ``{dtype: {output: max_rel_err}}``, each with its reason:
    float32 is exact end to end; ``lse`` accumulates in float32 whatever the dtype; the other
    low-precision entries say where the kernel casts (``low_reason``, ``{dtype}`` filled in).
    Slice floors: :func:`~kernel_harness.core.tolerance.standard_floor`, the gradient one for
    the outputs named in ``gradients``."""
    def reason(dtype: str, name: str) -> str:
        if dtype == "float32":
            return F32_REASON
        return lse_reason if name == "lse" else low_reason.format(dtype=dtype)

    return ToleranceTable.of_limits(
        {(dtype, name): (tol, reason(dtype, name))
         for dtype, outs in table.items() for name, tol in outs.items()},
        gradients=gradients)
