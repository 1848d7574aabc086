"""The op's core judged by value inside the kernels (issue 55, item 3): each declared
core primitive's results perturbed inside every interpreted kernel body
(:func:`~kernel_harness.core.compat.kernel_probes.perturbed_body`), beside the same program
with the bodies unchanged; :mod:`kernel_harness.run.kernel_poison` compares the two.
Sampled (:func:`perturbs`): each judged configuration compiles its kernels twice more."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

from kernel_harness.core.compat import kernel_probes, pallas_count, pallas_poison

#: The core is perturbed for an implementation's first FIRST configurations in a process,
#: then one in EVERY (a stable hash): each compiles the forward's kernels twice more.
FIRST, EVERY = 1, 16


def perturbs(seen: int, key: Any) -> bool:
    """Whether configuration ``key``, after ``seen`` others, is perturbed (FIRST, EVERY)."""
    return seen < FIRST or zlib.crc32(repr(key).encode()) % EVERY == 0


def moved(fwd: Any, bwd: Any, core: dict[str, frozenset[str]], x: list[Any],
          skipped: list[str]) -> dict[str, tuple[list[Any], list[Any]]]:
    """Per pass with a declared core: its outputs with the kernels as they are, and with
    the core perturbed inside their bodies (:func:`perturbing_bodies`); a pass where
    nothing of the core was perturbed is named in ``skipped`` instead. ``fwd``: the
    forward jaxpr; ``bwd``: poisoning's ``Backward`` (its residuals from the forward as
    it is: the backward's own kernels are perturbed)."""
    passes = []
    if fwd is not None and core.get("forward"):
        passes.append(("forward", fwd, x, None))
    if bwd is not None and core.get("backward"):
        ran = pallas_poison.evaluate(bwd.joint, x, 0, body=same)
        cts = [pallas_poison.fill(o.shape, o.dtype, 0) for o in ran[:bwd.outputs]]
        passes.append(("backward", bwd.jaxpr, cts, ran[bwd.outputs:]))
    out: dict[str, tuple[list[Any], list[Any]]] = {}
    for where, jaxpr, args, consts in passes:
        perturbing = perturbing_bodies(core[where])
        other = pallas_poison.evaluate(jaxpr, args, 0, consts=consts, body=perturbing)
        if perturbing.count:  # type: ignore[attr-defined]
            out[where] = (pallas_poison.evaluate(jaxpr, args, 0, consts=consts, body=same),
                          other)
        else:
            skipped.append(where)
    return out


def not_traced(fwd: Any) -> str | None:
    """Why the kernels of forward jaxpr ``fwd`` are not traced again at all (None: they
    are): TPU DMA, semaphore or barrier kernel bodies, which the TPU interpreter fails on
    outside their adapter."""
    special = sorted({op.name for op in (pallas_count.kernel_body_ops(fwd) if fwd is not None
                                         else ())
                      if op.name.startswith(("dma", "semaphore")) or "barrier" in op.name})
    return (f"the kernels use {', '.join(special[:3])} (TPU DMA/semaphore kernel bodies are "
            "not traced again)") if special else None


def not_perturbed(skipped: list[str]) -> str | None:
    """What :func:`moved`'s ``skipped`` passes mean, in one line (None: none)."""
    return (f"{' and '.join(skipped)}: no floating result of the declared core is computed "
            "in an interpreted kernel body (compiled kernels, or an integer product)"
            ) if skipped else None


def same(params: dict[str, Any]) -> Any:
    """The kernel-body transform that changes nothing."""
    return params["jaxpr"]


def perturbing_bodies(names: frozenset[str]) -> Callable[[Any], Any]:
    """A kernel-body transform perturbing ``names`` inside it, each body traced once."""
    made: dict[int, tuple[Any, Any]] = {}

    def body(params: dict[str, Any]) -> Any:
        jaxpr = params["jaxpr"]
        # Any interpret setting (True, the TPU interpreter's params): the body is traced.
        if id(jaxpr) not in made and params.get("interpret") not in (None, False):
            new, count = kernel_probes.perturbed_body(params, names)
            made[id(jaxpr)] = (jaxpr, new)
            body.count += count  # type: ignore[attr-defined]
        return made[id(jaxpr)][1] if id(jaxpr) in made else jaxpr

    body.count = 0  # type: ignore[attr-defined]
    return body
