"""A family record for a row-wise op from a few declarations (:func:`rowwise_family`).

The adapter, the float32 reference evaluation with its vjp, the default tolerances, the
metamorphic hooks (block-size-invariance from the block field, deterministic, finite-out)
and the export hook are the op's, once; a user's family names its case type, its kernel
and its plain-jnp reference::

    FAMILY = rowwise_family(name="rope", summary="fused rotary embedding",
                            case_type=RopeCase, kernel=rope, reference=rope_reference)

The kernel is called as ``kernel(*operands, block_rows=..., interpret=...)`` and returns
one ``[rows, OUTPUT.cols(width)]`` array; the reference as ``reference(*operands)`` with
float32 operands, in plain jnp (its source is embedded in exported repro scripts, so it
should use only ``jax``, ``jnp``, ``np`` and ``math``).
"""

from __future__ import annotations

import functools
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.core.case import Arrays
from kernel_harness.core.tolerance import ToleranceTable
from kernel_harness.ops.rowwise.cases import RowwiseCase, rowwise_cases, rowwise_events
from kernel_harness.records.blocks import block_variants
from kernel_harness.records.export import ExportSnippet
from kernel_harness.records.family import Family
from kernel_harness.records.hooks import Metamorphic
from kernel_harness.records.kernels import KernelExpectation

#: Default bounds, relative to each output's (and each row's) scale.
LIMITS: dict[str, tuple[float, str]] = {
    "float32": (1e-5, "float32 throughout: a few roundings of 2^-24 per element, room for "
                "transcendentals and reassociation; a float32 kernel that rounds anywhere to "
                "bfloat16 (2^-9) errs 200x more"),
    "bfloat16": (1.6e-2, "bfloat16 inputs and output (2^-8 per rounding), float32 math "
                 "inside or up to 4 bfloat16 roundings in a row"),
    "float16": (2e-3, "float16 inputs and output (2^-11 per rounding), up to 4 roundings"),
}


def gradient_names(case_type: type[RowwiseCase]) -> tuple[str, ...]:
    """``d<name>`` of each differentiable operand, in order."""
    return tuple(f"d{n}" for n, op in case_type.OPERANDS.items() if op.differentiable)


def default_tolerances(case_type: type[RowwiseCase],
                       dtypes: tuple[str, ...] = tuple(LIMITS)) -> ToleranceTable:
    """:data:`LIMITS` for ``out`` and every gradient of ``case_type``, per dtype."""
    grads = gradient_names(case_type)
    return ToleranceTable.of_limits(
        {(d, o): LIMITS[d] for d in dtypes for o in ("out", *grads)},
        gradients=frozenset(grads))


def _split(case_type: type[RowwiseCase]) -> tuple[list[str], list[str]]:
    names = list(case_type.OPERANDS)
    return names, [n for n in names if case_type.OPERANDS[n].differentiable]


def _forward_and_vjp(fn: Callable[..., Any], case_type: type[RowwiseCase],
                     arrays: dict[str, Any]) -> dict[str, Any]:
    """``out`` = fn(*operands) and the vjp of ``dout`` into each differentiable operand."""
    names, wrt = _split(case_type)

    def f(*diff: Any) -> Any:
        full = dict(arrays, **dict(zip(wrt, diff, strict=True)))
        return fn(*(full[n] for n in names))

    out, vjp = jax.vjp(f, *(arrays[n] for n in wrt))
    grads = vjp(arrays["dout"].astype(out.dtype)) if wrt else ()
    return {"out": out, **{f"d{n}": g for n, g in zip(wrt, grads, strict=True)}}


@functools.lru_cache(maxsize=64)
def _program(impl: Callable[..., Any], case_type: type[RowwiseCase], block_rows: int,
             interpret: Any) -> Callable[..., Any]:
    call = functools.partial(impl, block_rows=block_rows, interpret=interpret)
    return jax.jit(lambda arrays: _forward_and_vjp(call, case_type, arrays))


def run(impl: Callable[..., Any], case: RowwiseCase, inputs: Arrays,
        backend: Backend) -> Arrays:
    """``impl(*operands, block_rows=, interpret=)`` and its vjp on ``backend``."""
    program = _program(impl, type(case), case.block_rows, backend.pallas_interpret())
    arrays = {n: jax.device_put(a, backend.device) for n, a in inputs.items()}
    with backend.forcing_interpret():
        outs = jax.block_until_ready(program(arrays))
    return {n: np.asarray(v, np.float32) for n, v in outs.items()}


def traceable_of(kernel: Callable[..., Any]) -> Callable[..., Callable[[Arrays], Arrays]]:
    """``Metamorphic.traceable``: the adapter's program as ``f(inputs) -> outputs`` (for
    ``lowers-for-tpu`` and sharded runs); ``impl`` None is ``kernel``."""
    def traceable(impl: Callable[..., Any] | None, case: RowwiseCase,
                  backend: Backend) -> Callable[[Arrays], Arrays]:
        call = functools.partial(impl or kernel, block_rows=case.block_rows,
                                 interpret=backend.pallas_interpret())
        return lambda inputs: _forward_and_vjp(call, type(case), dict(inputs))

    return traceable


def reference_of(fn: Callable[..., Any]) -> Callable[[RowwiseCase, Arrays], Arrays]:
    """``Family.reference`` from a plain-jnp ``fn(*operands)``: evaluated on the CPU in
    float32 (the dtype-rounded inputs), matmuls at HIGHEST precision, its gradients by
    ``jax.vjp``."""
    def reference(case: RowwiseCase, inputs: Arrays) -> Arrays:
        with jax.default_device(jax.devices("cpu")[0]), \
                jax.default_matmul_precision("highest"):
            arrays = {n: jnp.asarray(a, jnp.float32) for n, a in inputs.items()}
            outs = _forward_and_vjp(fn, type(case), arrays)
        return {n: np.asarray(v, np.float32) for n, v in outs.items()}

    return reference


def export_of(kernel: Callable[..., Any], fn: Callable[..., Any]
              ) -> Callable[[RowwiseCase], ExportSnippet]:
    """``Family.export``: the kernel imported from its module, the reference's own source
    embedded (the script runs without the harness)."""
    source = textwrap.dedent(inspect.getsource(fn))

    def export(case: RowwiseCase) -> ExportSnippet:
        names, wrt = _split(type(case))
        run_kernel = f'''
NAMES, WRT = {names!r}, {wrt!r}


def _call(f, x):
    """out = f(*operands) and the vjp of dout into each differentiable operand."""
    def g(*d):
        full = dict(x, **dict(zip(WRT, d)))
        return f(*(full[n] for n in NAMES))

    out, vjp = jax.vjp(g, *(x[n] for n in WRT))
    grads = vjp(jnp.asarray(x["dout"], out.dtype)) if WRT else ()
    return {{"out": out, **{{"d" + n: v for n, v in zip(WRT, grads)}}}}


def run_kernel(x):
    f = lambda *a: kernel(*a, block_rows={case.block_rows}, interpret=INTERPRET)
    return {{k: np.asarray(v, np.float32) for k, v in _call(f, x).items()}}
'''
        reference = f'''
{source}

def reference(x):
    x32 = {{k: jnp.asarray(v, jnp.float32) for k, v in x.items()}}
    with jax.default_matmul_precision("highest"):
        outs = _call({fn.__name__}, x32)
    return {{k: np.asarray(v, np.float32) for k, v in outs.items()}}
'''
        return ExportSnippet(
            default_import=f"from {kernel.__module__} import {kernel.__name__} as kernel",
            run_kernel=run_kernel, reference=reference,
            outputs=("out", *(f"d{n}" for n in wrt)))

    return export


def rowwise_family(*, name: str, summary: str, case_type: type[RowwiseCase],
                   kernel: Callable[..., Any], reference: Callable[..., Any],
                   blocks: tuple[int, ...] = (8, 16, 32), widths: tuple[int, ...] = (128,),
                   dtypes: tuple[str, ...] = ("float32", "bfloat16"),
                   tolerances: ToleranceTable | None = None, backward_kernels: int = 0,
                   backends: frozenset[str] = frozenset({"interpret", "tpu-interpret"}),
                   contract: str = "", **fields: Any) -> Family:
    """The :class:`~kernel_harness.records.family.Family` of a row-wise op's kernel.

    ``blocks``, ``widths``, ``dtypes``: what the strategy draws (rows around the blocks:
    whole, partial, one, several). ``backward_kernels``: the Pallas kernels its vjp
    launches (0: a forward kernel differentiated by jax). Any other ``Family`` field
    (``relations``, ``events``, ``modes``, ``valid``...) may be given as a keyword."""
    grads = gradient_names(case_type)
    axes = {"out": ("row", "dim"), **{
        f"d{n}": ("row", "dim") if op.per_row else ("dim",)
        for n, op in case_type.OPERANDS.items() if op.differentiable}}
    first = next(iter(case_type.OPERANDS))
    record = dict(
        name=name, summary=summary, case_type=case_type,
        cases=rowwise_cases(case_type, blocks=blocks, widths=widths, dtypes=dtypes),
        kernel=kernel, run=run, reference=reference_of(reference),
        impl_signature=(f"{kernel.__name__}({', '.join(case_type.OPERANDS)}, *, block_rows, "
                        f"interpret) -> out [rows, cols]; differentiable in "
                        f"{', '.join(g[1:] for g in grads) or 'nothing'} (jax.vjp)"),
        output_axes=axes, tolerances=tolerances or default_tolerances(case_type, dtypes),
        capabilities=frozenset({"gradients"} if grads else ()), backends=backends,
        events=rowwise_events, contract=contract or (
            f"{name}: a row-wise op over [rows, width] inputs in blocks of block_rows rows "
            "(a last block may be partial); every element of out and of each gradient is "
            "compared."),
        modes=frozenset({"multi-row-block"} | (
            {"partial-last-row-block"} if case_type.PARTIAL_BLOCKS else set())),
        metamorphic=Metamorphic(roles={}, logit_input=first, traceable=traceable_of(kernel),
                                block_variants=block_variants({"block_rows": blocks})),
        export=export_of(kernel, reference),
        kernels=KernelExpectation(forward=1, backward=backward_kernels))
    return Family(**{**record, **fields})
