"""The adapter record: how the harness calls one kernel.

A family's ``kernel.py`` says in one :class:`Adapter` what every family record would
otherwise spell out again: the default implementation, how an ``--impl`` is called, the
function running an implementation on a backend, and the backends that can run it. The
family record takes it whole: ``Family(**ADAPTER.fields(), name=..., ...)``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
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
    :class:`~kernel_harness.spec.family.Family`.

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
        """The record as :class:`~kernel_harness.spec.family.Family` keyword arguments."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def expect_shape(family: str, out: Any, shape: tuple[int, ...]) -> None:
    """An adapter's check of what its kernel returned: a ValueError naming the family and
    both shapes when ``out`` is not ``shape`` (a wrong-shaped result is never judged)."""
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{family}: the kernel returned shape {tuple(out.shape)}, expected "
                         f"{tuple(shape)}")


def run_tpu_program(program: Callable[..., Any], inputs: Arrays, names: Sequence[str],
                    backend: Backend, *, extended: bool = False) -> Any:
    """``program(*inputs[names])`` on ``backend`` for a TPU kernel without an ``interpret``
    switch (:meth:`Backend.forcing_interpret`), its result blocked on; ``extended``: when
    interpreted, inside the harness's TPU interpreter extensions (kernels that access refs
    through reshapes and bitcasts)."""
    extend = (tpu_interpreter_extensions() if extended and backend.is_interpreted
              else contextlib.nullcontext())
    with extend, backend.forcing_interpret():
        args = [jax.device_put(np.asarray(inputs[n]), backend.device) for n in names]
        return jax.block_until_ready(program(*args))
