"""What a real implementation of a family runs, and how an implementation declares that it
falls back to something else.

* :class:`KernelExpectation` (``Family.kernels``): the fewest Pallas kernels one call of the
  implementation launches in its forward pass and in its backward pass (the vjp). An example
  below it is a FAIL naming the pass that ran no kernel and what ran instead
  (:mod:`kernel_harness.run.kernel_count` counts).
* :func:`fallback` (or a ``kernel_harness_fallback`` attribute): an
  implementation that knowingly runs plain JAX for some cases says so, with the reason; its
  examples below the expectation then pass, marked ``fallback declared``, never silently.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from kernel_harness.core.errors import UsageError

#: The attribute an implementation sets to declare, with its reason, that it falls back.
FALLBACK_ATTR = "kernel_harness_fallback"

F = TypeVar("F", bound=Callable[..., Any])


@dataclasses.dataclass(frozen=True)
class KernelExpectation:
    """The fewest Pallas kernels a real implementation launches per call.

    Attributes:
      forward: kernels in the forward pass (``jax.make_jaxpr`` of one call), at least.
      backward: kernels in the backward pass (the jaxpr of the function ``jax.vjp``
        returns, applied to cotangents), at least; 0 for a forward-only family, whose
        backward is then not traced.
      forward_computes: the op's core primitives the forward's kernels compute, each with
        its reason: ``{"exp|exp2": "the softmax's exponentials"}`` (``|``: either). For
        every output some kernel's result reaches, each must be computed inside a kernel
        body and flow into that kernel's result on the way to the output
        (:mod:`kernel_harness.core.compat.kernel_flow`); a kernel that only copies what
        XLA computed fails, class "math outside the kernel". Declare only what every real
        kernel of the family computes into every such output.
      backward_computes: the same for the backward pass (every gradient a kernel reaches).
    """

    forward: int = 1
    backward: int = 0
    forward_computes: Mapping[str, str] = dataclasses.field(default_factory=dict)
    backward_computes: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.forward < 0 or self.backward < 0 or not (self.forward or self.backward):
            raise ValueError(f"a kernel expectation needs some kernel, got {self}")
        for where, computes in (("forward", self.forward_computes),
                                ("backward", self.backward_computes)):
            for group, why in computes.items():
                if not all(name.strip() for name in str(group).split("|")):
                    raise ValueError(f"KernelExpectation.{where}_computes: {group!r} is not "
                                     "a primitive name or names joined by '|' (exp|exp2)")
                if not str(why).strip():
                    raise ValueError(f"KernelExpectation.{where}_computes[{group!r}] needs "
                                     "its reason")
            # Frozen and hashable (a counting wrapper is keyed by it).
            object.__setattr__(self, f"{where}_computes",
                               _Computes(sorted(computes.items())))

    def describe(self) -> str:
        """``fwd >= 1, bwd >= 1`` (``bwd`` left out for a forward-only family)."""
        parts = [f"fwd >= {self.forward}"] + ([f"bwd >= {self.backward}"] if self.backward
                                               else [])
        return ", ".join(parts)

    def computes_lines(self) -> list[str]:
        """One line per declared core primitive, for ``describe``: ``forward: exp|exp2
        (why)``; none where nothing is declared."""
        return [f"{where}: {group} ({why})"
                for where, computes in (("forward", self.forward_computes),
                                        ("backward", self.backward_computes))
                for group, why in computes.items()]


class _Computes(dict):
    """A read-only, hashable mapping of primitive groups to reasons."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self.items()))

    def _frozen(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("KernelExpectation's computes are read-only")

    __setitem__ = __delitem__ = update = pop = clear = setdefault = _frozen  # type: ignore


def fallback(reason: str) -> Callable[[F], F]:
    """Decorator declaring that an implementation runs plain JAX instead of its Pallas
    kernel for some cases, and why::

        @kernel_harness.fallback("rows longer than 4096 use jax.nn.softmax")
        def my_softmax(x, *, axis=-1, interpret=False): ...

    Where the user accepts the implementation's declarations (``check --accept-declared``,
    :func:`accepted_fallback`), its examples without a kernel then pass as ``PASS (fallback
    declared: <reason>)``; otherwise they fail like any fallback, the note saying what was
    declared and not accepted (only the user narrows a check).
    """
    text = check_reason(reason)

    def mark(fn: F) -> F:
        setattr(fn, FALLBACK_ATTR, text)
        return fn

    return mark


def check_reason(reason: Any) -> str:
    """``reason`` stripped; a UsageError unless it is a non-empty string."""
    if not isinstance(reason, str) or not reason.strip():
        raise UsageError(f"a declared fallback needs a reason (a non-empty string), "
                         f"got {reason!r}")
    return reason.strip()


def declared_fallback(impl: Callable[..., Any] | None) -> str | None:
    """The fallback reason ``impl`` declares (its ``kernel_harness_fallback``), or None."""
    if impl is None:
        return None
    declared = getattr(impl, FALLBACK_ATTR, None)
    if declared is None and isinstance(impl, functools.partial):
        declared = getattr(impl.func, FALLBACK_ATTR, None)
    return None if declared is None else check_reason(declared)


def accepted_fallback(impl: Callable[..., Any] | None, *, accept: bool
                      ) -> tuple[Callable[..., Any] | None, str | None]:
    """``impl`` as a check takes it, and a note: the fallback it declares about itself is
    honoured only where the user accepts its declarations (``accept``); otherwise a
    stand-in calling ``impl`` without the declaration (its examples without a kernel fail)
    and a note naming the declaration and how the user allows it."""
    reason = declared_fallback(impl)
    if reason is None or accept:
        return impl, None
    assert impl is not None

    @functools.wraps(impl)
    def undeclared(*args: Any, **kwargs: Any) -> Any:
        return impl(*args, **kwargs)

    undeclared.__dict__.pop(FALLBACK_ATTR, None)
    return undeclared, (f"the implementation declares a fallback ({reason}): NOT accepted, "
                        "its examples without a Pallas kernel fail (only the user allows "
                        "it: --accept-declared)")
