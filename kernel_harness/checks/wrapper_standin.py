"""Whether an implementation's wrapper does at a claimed size what the family's own wrapper
does (issue 55, item 5; round 9 of the adversarial set).

``claimed-sizes`` compares what a program computes at a claimed size with what it computes
at a small one, by its primitives: a wrapper made only of layout (a reshape, a transpose, a
``where`` on an iota) whose effect depends on the size (rows interleaved past 512, logits
masked past 32768, keys read through a 1024-key window) keeps its primitives at every size
and passes. Running the real kernel at a claimed size costs minutes in interpret mode; the
wrapper alone costs little. So here both programs, the implementation's and the family's
own kernel's (``Claim.call``), are traced on concrete inputs of the same size and evaluated
with every Pallas kernel replaced by a **stand-in**
(:func:`kernel_harness.core.compat.pallas_poison.evaluate`), compiled as one program: it
records a signature of everything the kernel is handed (its inputs' bits by position) and
returns a fixed pattern. Where the two programs hand their kernels the same inputs and
return the same outputs from the same kernel results at the small size, they must at
every claimed size too (or, where that is too large to hold, the largest rung under
it); a difference there is a ghost branch (the wrapper does something else to the data
at that size), whatever primitives spell it. An implementation whose wrapper already
differs at the small size (another layout, padding, block sizes) is not compared: the real
runs judge it there.

Only for an implementation given with ``--impl``: the family's own kernel is the baseline.
Not seen: a kernel inside a ``cond``/``while``/``scan`` body (its stand-in sees traced
inputs and returns a fixed pattern), and what the kernel itself does with its inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.core.backends import Backend, running_on
from kernel_harness.core.compat import pallas_bodies, pallas_poison


def _positions(shape: Sequence[int]) -> Any:
    """A hash of each position (uint32, wrapping): odd multipliers, a xor-shift."""
    i = jax.lax.iota(jnp.uint32, math.prod(shape)).reshape(tuple(shape))
    h = i * jnp.uint32(2654435761) + jnp.uint32(0x9E3779B9)
    return h ^ (h >> 15)


def _signature(x: Any) -> Any:
    """A uint32 digest of ``x`` by position: its values' bits times a hash of each place,
    summed with wrapping (integer sums: the same whatever order XLA adds in)."""
    x = jnp.asarray(x)
    if jnp.issubdtype(x.dtype, jnp.inexact):
        bits = jax.lax.bitcast_convert_type(x.astype(jnp.float32), jnp.uint32)
    else:
        bits = x.astype(jnp.uint32)
    if x.ndim == 0:
        return bits
    return jnp.sum(bits * _positions(x.shape), dtype=jnp.uint32)


def _pattern(shape: Sequence[int], dtype: Any, salt: int) -> Any:
    """A stand-in result: values that differ between nearby positions."""
    h = _positions(shape) + jnp.uint32(salt)
    dtype = jnp.dtype(dtype)
    if dtype == jnp.bool_:
        return (h & 1) == 0
    if jnp.issubdtype(dtype, jnp.inexact):
        # Multiples of 2^-10: exact however XLA rewrites the arithmetic (a division
        # by 1021 became a multiplication in one program and not in another, 1 ulp apart).
        return ((h % 1021).astype(jnp.float32) * (1 / 1024) + 0.5).astype(dtype)
    return (h % 97).astype(dtype)


class StandIn:
    """A kernel stand-in: records the signature of what each kernel is handed (in order)
    and returns a pattern (the same whatever the inputs: any difference in the inputs is in
    the record, any in what the wrapper makes of the results is in the outputs). With
    ``keep`` (kernel texts, :func:`kernel_harness.core.compat.pallas_bodies.kernel_text`),
    only a kernel printed as one of them is stood in for; any other runs (an
    implementation's kernel that the family's wrapper does not launch, an epilogue)."""

    def __init__(self, log: list[Any] | None, keep: frozenset[str] | None = None) -> None:
        self.log = log
        self.keep = keep
        self.nested = self if log is None else StandIn(None, keep)

    def __call__(self, invals: Sequence[Any], avals: Sequence[Any], eqn: Any = None
                 ) -> list[Any] | None:
        if self.keep is not None and (eqn is None or
                                      pallas_bodies.kernel_text(eqn) not in self.keep):
            return None
        if self.log is not None:
            self.log.append(jnp.stack([_signature(v) for v in invals] or
                                      [jnp.uint32(0)]))
        return [_pattern(a.shape, a.dtype, k) for k, a in enumerate(avals)]


def concrete(arrays: Mapping[str, Any], integers: Callable[..., np.ndarray] | None,
             seed: int = 0) -> dict[str, np.ndarray]:
    """Concrete inputs for abstract ``arrays``: floats from a standard normal, integers from
    the family's ``integers(name, abstract, arrays, rng)`` (``Claim.integers``; zeros
    without one)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, a in arrays.items():
        if jnp.issubdtype(a.dtype, jnp.floating):
            out[name] = rng.standard_normal(a.shape, dtype=np.float32).astype(a.dtype)
        elif integers is not None:
            out[name] = np.asarray(integers(name, a, arrays, rng)).astype(a.dtype)
        else:
            out[name] = np.zeros(a.shape, a.dtype)
    return out


def traced(call: Callable[..., Any], impl: Callable[..., Any], arrays: Mapping[str, Any],
           backend: Backend) -> Any:
    """``impl`` called as ``call`` does (``Claim.call``), traced on ``arrays`` (abstract or
    concrete) with ``backend`` current."""
    with running_on(backend):
        return jax.make_jaxpr(lambda a: call(impl, a))(dict(arrays))


def run(call: Callable[..., Any], impl: Callable[..., Any], arrays: Mapping[str, Any],
        backend: Backend, keep: frozenset[str] | None = None, closed: Any = None
        ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``impl`` called as ``call`` does on concrete ``arrays`` (``closed``: that call traced
    already, :func:`traced`), its kernels stood in for (with ``keep``, only those
    :class:`StandIn` keeps), compiled as one program: the signatures of what each stood-in
    kernel was handed (a kernel inside a loop or branch body is not recorded), and the
    outputs."""
    if closed is None:
        closed = traced(call, impl, arrays, backend)
    leaves = jax.tree_util.tree_leaves(dict(arrays))

    def program(*args: Any) -> tuple[list[Any], list[Any]]:
        log: list[Any] = []
        outs = pallas_poison.evaluate(closed, args, StandIn(log, keep))
        return log, outs

    log, outs = jax.jit(program)(*leaves)
    return [np.asarray(s) for s in log], [np.asarray(o) for o in outs]


def compared(call: Callable[..., Any], impl: Callable[..., Any], family: Callable[..., Any],
             arrays: Mapping[str, Any], integers: Callable[..., np.ndarray] | None,
             backend: Backend) -> str | None:
    """:func:`difference` of ``impl``'s and ``family``'s (the family's own kernel's) stand-in
    runs on the same concrete inputs for ``arrays`` (:func:`concrete`). Only the kernels
    printed as one of the family's are stood in for in ``impl``'s: a kernel of its own (an
    epilogue that zeroes rows past some size) runs, so what it does to the data is
    compared too."""
    inputs = concrete(arrays, integers)
    theirs = traced(call, family, inputs, backend)  # one trace: its kernels' texts, its run
    return difference(
        run(call, impl, inputs, backend, frozenset(pallas_bodies.kernel_texts(theirs))),
        run(call, family, inputs, backend, closed=theirs))


def matched(mine: Sequence[str], theirs: Sequence[str]) -> list[tuple[int, int]]:
    """``(j, k)`` for each of ``mine``'s kernels printed as ``theirs``' kernel ``k`` (in
    order, each used once): the kernels an implementation shares with the family."""
    pairs, used = [], set()
    for j, text in enumerate(mine):
        k = next((k for k, t in enumerate(theirs) if t == text and k not in used), None)
        if k is not None:
            used.add(k)
            pairs.append((j, k))
    return pairs


def kernel_difference(mine: Sequence[str], theirs: Sequence[str],
                      pairs: Sequence[tuple[int, int]]) -> str | None:
    """For kernels shared with the family at another size (``pairs``, :func:`matched`),
    the first that prints otherwise here than the family's, with its first differing
    line; None where every shared kernel is still the family's."""
    for j, k in pairs:
        if j >= len(mine) or k >= len(theirs) or mine[j] == theirs[k]:
            continue  # a kernel count that differs is reported by the count
        a, b = mine[j].splitlines(), theirs[k].splitlines()
        at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                  min(len(a), len(b)))
        line = (a[at].strip()[:100] if at < len(a) else "(ends)",
                b[at].strip()[:100] if at < len(b) else "(ends)")
        return (f"kernel {j + 1}, the family's kernel {k + 1} at the small size, is another "
                f"kernel here (first difference: `{line[0]}`, the family's `{line[1]}`)")
    return None


def difference(mine: tuple[list[np.ndarray], list[np.ndarray]],
               theirs: tuple[list[np.ndarray], list[np.ndarray]]) -> str | None:
    """How two stand-in runs differ (None: the same): in what their kernels were handed, or
    in what they returned from the same kernel results."""
    (log_a, out_a), (log_b, out_b) = mine, theirs
    if len(log_a) != len(log_b):
        return f"it launches {len(log_a)} kernel(s), the family's wrapper {len(log_b)}"
    for k, (a, b) in enumerate(zip(log_a, log_b, strict=True)):
        if not np.array_equal(a, b):
            return f"kernel {k + 1} is handed other inputs than the family's wrapper hands it"
    if len(out_a) != len(out_b):
        return f"it returns {len(out_a)} output(s), the family's wrapper {len(out_b)}"
    for k, (a, b) in enumerate(zip(out_a, out_b, strict=True)):
        if a.shape != b.shape or a.dtype != b.dtype or not np.array_equal(
                a, b, equal_nan=True):
            return (f"from the same kernel results it returns another output {k + 1} than "
                    f"the family's wrapper")
    return None
