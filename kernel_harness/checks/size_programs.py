"""What a program traced at one size is made of, for ``claimed-sizes``: the Pallas kernels
every path launches, the non-layout primitives around them, and each kernel's body
(printed, and digested), on abstract inputs (tracing allocates nothing and runs nothing)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import jax.numpy as jnp

from kernel_harness.checks import wrapper_standin
from kernel_harness.core.backends import Backend
from kernel_harness.core.compat import pallas_bodies, pallas_count

#: Primitives that only move or relabel data (a wrapper may pad or reshape differently at
#: another size); everything else appearing only at a claimed size is a different program.
LAYOUT: frozenset[str] = frozenset({
    "reshape", "broadcast_in_dim", "squeeze", "expand_dims", "transpose",
    "convert_element_type", "pad", "slice", "dynamic_slice", "dynamic_update_slice", "copy",
    "copy_p", "iota", "device_put", "select_n", "rev", "gather", "scatter",
})


@dataclasses.dataclass(frozen=True)
class Traced:
    """One call traced at one size.

    Attributes:
      kernels: the Pallas kernels every path launches (``pallas_count.pallas_kernels``).
      prims: the non-layout primitives around them, and ``a cast to DTYPE`` for each
        narrowing cast (:func:`narrowing`).
      texts: each kernel printed (``pallas_bodies.kernel_texts``), in program order.
      digests: each kernel's body digested (``pallas_bodies.kernel_digests``).
    """

    kernels: int
    prims: frozenset[str]
    texts: list[str]
    digests: list[pallas_bodies.KernelDigest]


def traced_at(call: Callable[..., Any], impl: Callable[..., Any], arrays: Mapping[str, Any],
              backend: Backend) -> Traced:
    """``impl`` called as ``call`` does (``Claim.call``), traced on ``arrays``."""
    jaxpr = wrapper_standin.traced(call, impl, arrays, backend)
    names = set(pallas_count.primitive_counts(jaxpr))
    return Traced(pallas_count.pallas_kernels(jaxpr),
                  frozenset(names - LAYOUT) | narrowing(jaxpr, arrays),
                  pallas_bodies.kernel_texts(jaxpr), pallas_bodies.kernel_digests(jaxpr))


def structure(call: Callable[..., Any], impl: Callable[..., Any], arrays: Mapping[str, Any],
              backend: Backend) -> tuple[int, frozenset[str]]:
    """``(kernels, primitives)`` of :func:`traced_at`."""
    found = traced_at(call, impl, arrays, backend)
    return found.kernels, found.prims


def narrowing(jaxpr: Any, arrays: Mapping[str, Any]) -> frozenset[str]:
    """``a cast to bfloat16`` for each floating dtype the program casts to outside its
    kernels with fewer mantissa bits than every floating input has: lower precision, which
    a cast spells as layout (round 7 computed float32 softmax rows in bfloat16 past 2^22
    elements only; round 8 passed float32 operands through float8 on a compiled run only)."""
    inputs = [jnp.finfo(a.dtype).nmant for a in arrays.values()
              if jnp.issubdtype(a.dtype, jnp.floating)]
    if not inputs:
        return frozenset()
    return frozenset(f"a cast to {d.name}" for d in pallas_count.float_casts(jaxpr)
                     if jnp.finfo(d).nmant < min(inputs))
