"""The hook a family fills in to opt into ``kernel-harness bench`` (:class:`Bench`).

A family that provides it says how to build one representative case at a given
sequence length and dtype, and which jax-traceable program to time for a mode
(``fwd``: the forward call alone; ``fwd+bwd``: forward and ``jax.vjp``), naming its
results as the family's outputs so that the timed results themselves are judged against
the reference. The timing and memory machinery lives in
:mod:`kernel_harness.checks.bench`; the correctness pre-check of every configuration goes
through the family's own ``run`` and judge.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from kernel_harness.core.backends import Backend
from kernel_harness.core.case import Arrays

#: The modes ``kernel-harness bench --mode`` accepts.
MODES: tuple[str, ...] = ("fwd", "fwd+bwd")


@dataclasses.dataclass(frozen=True)
class Timed:
    """What to time: ``fn(arrays) -> outputs``, jax-traceable, called with exactly the
    case inputs named in ``inputs`` (so argument bytes count only what the call reads).

    ``outputs`` names the leaves of ``fn``'s result (``jax.tree_util.tree_leaves`` order)
    as the family's outputs (``Family.output_axes``): after timing, the results of the
    timed calls are judged under those names against the family's reference."""

    fn: Callable[[Arrays], Any]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.outputs or len(set(self.outputs)) != len(self.outputs):
            raise ValueError(f"Timed.outputs must name each result once, got {self.outputs}")


@contextlib.contextmanager
def _no_context(backend: Backend) -> Iterator[None]:
    yield


@dataclasses.dataclass(frozen=True, kw_only=True)
class Bench:
    """A family's benchmark hook.

    Attributes:
      case_at: ``case_at(seq_len, dtype)`` -> the family's case at that length (seed 0):
        one fixed, representative configuration, described by ``config``.
      program: ``program(impl, case, backend, mode)`` -> :class:`Timed`; ``impl`` None
        means the family's kernel. Traced and compiled by the bench machinery.
      config: the configuration in words (``batch 1, 4 heads, head_dim 128, causal``).
      modes: the modes the family can time (a decode kernel has no backward).
      context: ``context(backend)`` -> context manager around tracing, compiling and
        running (e.g. forced TPU interpret mode, matmul precision).
    """

    case_at: Callable[[int, str], Any]
    program: Callable[[Callable[..., Any] | None, Any, Backend, str], Timed]
    config: str
    modes: frozenset[str] = frozenset(MODES)
    context: Callable[[Backend], AbstractContextManager[None]] = _no_context

    def __post_init__(self) -> None:
        unknown = self.modes - set(MODES)
        if unknown:
            raise ValueError(f"Bench.modes: unknown {sorted(unknown)}; known: {MODES}")


def attention_program(forward: Callable[..., Any], names: tuple[str, ...], mode: str,
                      cotangent: str = "do",
                      gradients: tuple[str, ...] = ("dq", "dk", "dv")) -> Timed:
    """The usual :class:`Timed` of an attention call ``forward(*arrays[names]) -> out``:
    ``fwd`` times it alone; ``fwd+bwd`` times ``jax.vjp`` of it with cotangent
    ``arrays[cotangent]`` (gradients in every named input) - one forward with its
    residuals and one backward, as a training step runs them. The results are the
    family's ``out`` and, per named input, the output named in ``gradients``."""
    import jax

    if len(gradients) != len(names):
        raise ValueError(f"one gradient name per input: {names} vs {gradients}")
    if mode == "fwd":
        return Timed(fn=lambda a: forward(*(a[n] for n in names)), inputs=names,
                     outputs=("out",))
    if mode != "fwd+bwd":
        raise ValueError(f"unknown mode {mode!r}; known: {MODES}")

    def step(a: Arrays) -> Any:
        out, vjp = jax.vjp(forward, *(a[n] for n in names))
        return out, vjp(a[cotangent].astype(out.dtype))

    return Timed(fn=step, inputs=(*names, cotangent), outputs=("out", *gradients))
