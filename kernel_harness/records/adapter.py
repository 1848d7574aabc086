"""The adapter record: how the harness calls one kernel.

A family's ``kernel.py`` says in one :class:`Adapter` what every family record would
otherwise spell out again: the default implementation, how an ``--impl`` is called, the
function running an implementation on a backend, and the backends that can run it. The
family record takes it whole: ``Family(**ADAPTER.fields(), name=..., ...)``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.core.case import Arrays
from kernel_harness.core.compat.interpreter_ext import tpu_interpreter_extensions

#: Backends a TPU Pallas kernel runs on: the generic interpreter, TPU interpret mode, a TPU.
TPU_BACKENDS: frozenset[str] = frozenset({"interpret", "tpu-interpret", "tpu"})

#: The VMEM limit handed to an interpreted TPU kernel that otherwise asks the chip for it
#: (``pltpu.get_tpu_info``, which has no answer on a CPU); on a TPU the kernel asks.
INTERPRET_VMEM_BYTES = 64 * 2**20


@dataclasses.dataclass(frozen=True, kw_only=True)
class Adapter:
    """How a family calls its kernel; the fields of the same names in
    :class:`~kernel_harness.records.family.Family`.

    Attributes:
      kernel: the default implementation (the kernel entry point).
      impl_signature: how ``kernel`` is called, for the README and ``--impl``.
      run: ``run(impl, case, inputs, backend) -> outputs``.
      backends: the backends that can run it.
    """

    kernel: Callable[..., Any]
    impl_signature: str
    run: Callable[[Callable[..., Any], Any, Arrays, Backend], Arrays]
    backends: frozenset[str]

    def fields(self) -> dict[str, Any]:
        """The record as :class:`~kernel_harness.records.family.Family` keyword arguments."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def expect_shape(family: str, out: Any, shape: tuple[int, ...]) -> None:
    """An adapter's check of what its kernel returned: a ValueError naming the family and
    both shapes when ``out`` is not ``shape`` (a wrong-shaped result is never judged)."""
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{family}: the kernel returned shape {tuple(out.shape)}, expected "
                         f"{tuple(shape)}")


@contextlib.contextmanager
def tpu_kernel_context(backend: Backend, *, extended: bool = False,
                       **schedule: Any) -> Iterator[None]:
    """Where a TPU kernel without an ``interpret`` switch runs on ``backend``:
    :meth:`Backend.forcing_interpret` with ``schedule`` (TPU interpreter settings) and,
    ``extended`` and interpreted, inside the harness's TPU interpreter extensions (kernels
    that access refs through reshapes and bitcasts)."""
    extend = (tpu_interpreter_extensions() if extended and backend.is_interpreted
              else contextlib.nullcontext())
    with extend, backend.forcing_interpret(**schedule):
        yield


Traceable = Callable[[Callable[..., Any] | None, Any, Backend],
                     Callable[[dict[str, Any]], dict[str, Any]]]


def traced_run(traceable: Traceable, *,
               context: Callable[[Any, Backend], contextlib.AbstractContextManager[Any]]
               | None = None) -> Callable[[Callable[..., Any], Any, Arrays, Backend], Arrays]:
    """An adapter's ``run`` made from its ``traceable`` (``traceable(impl, case, backend) ->
    f(inputs) -> outputs``, the hook TPU lowering and sharded runs call), so that how the
    inputs reach the kernel's program is written once: every input placed on the backend's
    device, ``f`` called inside ``context(case, backend)`` (none by default) with that device
    as jax's default, the outputs blocked on and returned as float32 numpy."""
    def run(impl: Callable[..., Any], case: Any, inputs: Arrays, backend: Backend) -> Arrays:
        f = traceable(impl, case, backend)
        around = context(case, backend) if context is not None else contextlib.nullcontext()
        with around, jax.default_device(backend.device):
            placed = {name: jax.device_put(x, backend.device) for name, x in inputs.items()}
            outputs = jax.block_until_ready(f(placed))
        return {name: np.asarray(x, np.float32) for name, x in outputs.items()}

    return run


class KernelSignatureError(RuntimeError):
    """A kernel's keyword arguments are not the layout its adapter knows (a kernel whose
    installed version renamed or dropped one): never a call with arguments dropped."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class JittedTpuProgram:
    """A TPU kernel without an ``interpret`` switch, called as one jitted program over
    named inputs: the ``run`` and ``traceable`` of its adapter, written once.

    Attributes:
      family: the family's name (for errors).
      kernel: the default implementation.
      operands: ``operands(case) -> input names`` passed positionally, in order.
      options: ``options(fields, interpreted) -> keyword arguments`` of the call, from the
        case's static fields (``dict(case.static_key())``) and whether the backend
        interprets the kernel.
      outputs: the names of what the kernel returns, in order (one name: a single array).
      shapes: ``shapes(case, inputs) -> one shape per output``; a result of another shape
        is an error, never judged.
      extended: interpreted inside the harness's TPU interpreter extensions
        (:func:`tpu_kernel_context`).
      keywords: keyword arguments ``options`` passes that the kernel must take; an
        implementation without one is a :class:`KernelSignatureError` naming them and the
        jax version (a kernel of another jax), checked before anything is traced.
      low_opt_when_interpreted: interpreted programs compiled at XLA optimisation level 0
        (a kernel whose interpreted program XLA spends long optimising for nothing).
    """

    family: str
    kernel: Callable[..., Any]
    operands: Callable[[Any], Sequence[str]]
    options: Callable[[dict[str, Any], bool], dict[str, Any]]
    outputs: tuple[str, ...]
    shapes: Callable[[Any, Arrays], Sequence[tuple[int, ...]]]
    extended: bool = False
    keywords: tuple[str, ...] = ()
    low_opt_when_interpreted: bool = False

    def program(self, impl: Callable[..., Any], case: Any, backend: Backend
                ) -> Callable[..., Any]:
        """``impl`` jitted with the case's options (one program per static key)."""
        self.check_signature(impl)
        return _jitted(self, impl, case.static_key(), backend.is_interpreted)

    def check_signature(self, impl: Callable[..., Any]) -> None:
        """:class:`KernelSignatureError` when ``impl`` takes none of some :attr:`keywords`
        (an implementation taking ``**kwargs``, or without a signature, is not judged)."""
        try:
            params = inspect.signature(impl).parameters
        except (TypeError, ValueError):
            return  # a C callable or partial without a signature: the call itself will say
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            return
        missing = [k for k in self.keywords if k not in params]
        if missing:
            raise KernelSignatureError(
                f"{self.family}: {getattr(impl, '__name__', impl)!s} (jax "
                f"{jax.__version__}) takes no {missing}, which the adapter passes; the "
                "harness knows the signature of the kernel of jax 0.10.2/0.12.0.1 - adapt "
                "the family's kernel.py to this version")

    def _named(self, result: Any) -> dict[str, Any]:
        results = (result,) if len(self.outputs) == 1 else tuple(result)
        if len(results) != len(self.outputs):
            raise ValueError(f"{self.family}: the kernel returned {len(results)} results, "
                             f"expected {len(self.outputs)} ({', '.join(self.outputs)})")
        return dict(zip(self.outputs, results, strict=True))

    def traceable(self, impl: Callable[..., Any] | None, case: Any, backend: Backend
                  ) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """The program as ``f(inputs) -> outputs`` (for TPU lowering); ``impl`` None: the
        default implementation."""
        program = self.program(impl or self.kernel, case, backend)
        names = tuple(self.operands(case))
        return lambda inputs: self._named(program(*(inputs[n] for n in names)))

    def run(self, impl: Callable[..., Any], case: Any, inputs: Arrays, backend: Backend
            ) -> Arrays:
        """Every output of ``impl`` on ``backend`` (:meth:`traceable` run by
        :func:`traced_run` inside :func:`tpu_kernel_context`), shape-checked, as float32."""
        named = traced_run(self.traceable, context=self._context)(impl, case, inputs, backend)
        for (name, got), shape in zip(named.items(), self.shapes(case, inputs), strict=True):
            expect_shape(f"{self.family} ({name})", got, shape)
        return named

    def _context(self, case: Any, backend: Backend) -> contextlib.AbstractContextManager[None]:
        return tpu_kernel_context(backend, extended=self.extended)

    def adapter(self, *, impl_signature: str, backends: frozenset[str]) -> Adapter:
        """The family's :class:`Adapter` running this program."""
        return Adapter(kernel=self.kernel, impl_signature=impl_signature, run=self.run,
                       backends=backends)


@functools.lru_cache(maxsize=128)
def _jitted(spec: JittedTpuProgram, impl: Callable[..., Any], key: tuple[Any, ...],
            interpreted: bool) -> Callable[..., Any]:
    options = spec.options(dict(key), interpreted)
    low = spec.low_opt_when_interpreted and interpreted
    return jax.jit(lambda *operands: impl(*operands, **options),
                   compiler_options={"xla_backend_optimization_level": 0} if low else None)
