"""The ``claimed-sizes`` property: the implementation traced at every size its family
claims (:class:`~kernel_harness.spec.claims.Claim`) on abstract inputs, and what it would
run there compared with what it runs at a small size (issue 55, item 5).

At a claimed size the traced program must launch as many Pallas kernels as at the small
size (and at least what the family expects), and compute nothing the small size does not
(no math, host callback or concatenation appearing only past some size: a "ghost branch",
an implementation that runs its kernel only for the sizes a test draws). Tracing allocates
nothing and runs nothing, so a 256k-row softmax costs what a small one does. The
implementation's ``kernel_harness.current_backend()`` is the check's backend.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import hypothesis
import jax
from hypothesis import given
from hypothesis import strategies as st

from kernel_harness.core.backends import Backend, running_on
from kernel_harness.core.compat import pallas_count
from kernel_harness.core.errors import PropertyNotApplicable
from kernel_harness.run.report import PREFIX
from kernel_harness.spec.family import Family

#: Primitives that only move or relabel data (a wrapper may pad or reshape differently at
#: another size); everything else appearing only at a claimed size is a different program.
LAYOUT: frozenset[str] = frozenset({
    "reshape", "broadcast_in_dim", "squeeze", "expand_dims", "transpose",
    "convert_element_type", "pad", "slice", "dynamic_slice", "dynamic_update_slice", "copy",
    "copy_p", "iota", "device_put", "select_n", "rev", "gather", "scatter",
})


class GhostBranch(AssertionError):
    """The implementation runs another program at a claimed size than at a small one."""


def _shapes(arrays: Mapping[str, Any]) -> str:
    return " ".join(f"{n}={tuple(a.shape)}" for n, a in arrays.items())


def structure(call: Callable[..., Any], impl: Callable[..., Any], arrays: Mapping[str, Any],
              backend: Backend) -> tuple[int, frozenset[str]]:
    """``(kernels, primitives)``: the Pallas kernels every path of ``impl``'s traced call
    launches on ``arrays`` (abstract), and the names of the non-layout primitives around
    them."""
    with running_on(backend):
        jaxpr = jax.make_jaxpr(lambda a: call(impl, a))(dict(arrays))
    names = set(pallas_count.primitive_counts(jaxpr))
    return pallas_count.pallas_kernels(jaxpr), frozenset(names - LAYOUT)


def claimed_sizes(family: Family, *, backend: Backend, impl: Callable[..., Any] | None = None,
                  impl_spec: str | None = None, observer: Any = None) -> Callable[[], None]:
    """The property "at every claimed size the implementation runs the program it runs at a
    small size" (a SKIP for a family that claims no sizes)."""
    claim = family.claimed
    if claim is None:
        raise PropertyNotApplicable(
            f"{family.name} claims no sizes (Family.claimed): the largest sizes its kernel is "
            "meant for are not declared")
    sizes = claim.kept(family.without)
    if not sizes:
        raise PropertyNotApplicable(
            f"{family.name}: every claimed size uses what this check leaves out "
            f"({', '.join(sorted(family.without))})")
    fn = impl if impl is not None else family.kernel
    small = claim.small()
    base_kernels, base_prims = structure(claim.call, fn, small, backend)
    expected = family.kernels.forward if family.kernels is not None else 0

    @given(index=st.sampled_from(range(len(sizes))))
    def prop(index: int) -> None:
        arrays = sizes[index]
        kernels, prims = structure(claim.call, fn, arrays, backend)
        dtypes = ",".join(sorted({str(a.dtype) for a in arrays.values()}))
        problems = []
        if kernels != base_kernels or kernels < expected:
            problems.append(f"the program launches {kernels} Pallas kernel(s) there, "
                            f"{base_kernels} at {_shapes(small)} (the family expects >= "
                            f"{expected})")
        extra = sorted(prims - base_prims)
        if extra:
            problems.append(f"it computes {', '.join(extra)} there and not at "
                            f"{_shapes(small)}")
        hypothesis.event(f"claimed size {index}: {kernels} kernel(s)")
        if observer is not None:  # every claimed size traced counts; passed only if it held
            observer.record_check(("claimed size", index))
            observer.end_example(not problems)
        if problems:
            raise GhostBranch(
                f"{PREFIX} FAIL {family.name} ghost branch {dtypes} {_shapes(arrays)} "
                f"backend={backend.name}: at this claimed size (traced, not run) "
                + "; ".join(problems) + f"\n  claim: {claim.reason}")

    prop.__name__ = f"{family.name}_claimed_sizes"
    prop.kh_example_fraction = 0.2  # a few examples: the claimed sizes are few
    return prop
