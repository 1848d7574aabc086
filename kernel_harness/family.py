"""The frozen Family spec and the registry of built-in families.

A family pairs a kernel with everything needed to check it: the adapter that
runs an implementation on a backend, an independent reference, a case
strategy, a tolerance table, output axis names and declared capabilities.
Adding a family is one folder under ``kernel_harness/families`` and one line
in :data:`BUILTIN_FAMILIES`.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from hypothesis.strategies import SearchStrategy

from kernel_harness.backends import Backend
from kernel_harness.case import Case
from kernel_harness.tolerance import ToleranceTable

if TYPE_CHECKING:
    from kernel_harness.metamorphic import Metamorphic

Arrays = dict[str, np.ndarray]

#: Capability names a family may declare (``kernel-harness list`` prints them).
CAPABILITIES: frozenset[str] = frozenset(
    {
        "causal", "full", "local-window", "chunked-causal", "numpy-mask", "segments",
        "gqa", "mqa", "soft-cap", "sinks", "bias", "sm-scale", "residuals", "layouts",
        "q-len-ne-kv-len", "ragged-lengths", "decode", "paged", "gradients",
    }
)


class UnknownFamily(KeyError):
    """No family of that name is registered."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclasses.dataclass(frozen=True, kw_only=True)
class Family:
    """Everything the harness needs to check one kernel family.

    Attributes:
      name: short name used on the command line (``splash``).
      summary: one line saying what kernel this is.
      case_type: the family's :class:`~kernel_harness.case.Case` subclass.
      cases: zero-argument factory of the Hypothesis strategy drawing cases.
      kernel: the default implementation (the kernel entry point); ``--impl``
        replaces it with any callable of the same signature.
      impl_signature: how ``kernel`` is called, for the README and ``--impl``.
      run: ``run(impl, case, inputs, backend) -> outputs``: calls ``impl`` on
        ``backend`` and returns every checked output (forward and gradients).
      reference: ``reference(case, inputs) -> outputs``, plain jnp at the
        highest precision, its own mask construction.
      output_axes: axis names of each output, which also fixes the outputs.
      tolerances: per (dtype, output) tolerances.
      capabilities: what the family's kernel supports (see :data:`CAPABILITIES`).
      backends: concrete backends this family can run on.
      valid: ``valid(case) -> {output: bool mask}`` of the elements inside
        the kernel's contract (e.g. rows that see no key excluded); outputs
        not named are compared whole.
      events: ``events(case) -> labels`` counted to show what the cases reach.
      contract: the family's semantic choices, in words (fully masked rows...).
      metamorphic: hooks for the metamorphic properties, lowering and sharding
        (:class:`kernel_harness.metamorphic.Metamorphic`); None opts out.
    """

    name: str
    summary: str
    case_type: type[Case]
    cases: Callable[[], SearchStrategy[Any]]
    kernel: Callable[..., Any]
    impl_signature: str
    run: Callable[[Callable[..., Any], Any, Arrays, Backend], Arrays]
    reference: Callable[[Any, Arrays], Arrays]
    output_axes: Mapping[str, tuple[str, ...]]
    tolerances: ToleranceTable
    capabilities: frozenset[str]
    backends: frozenset[str]
    valid: Callable[[Any], Mapping[str, np.ndarray]] = lambda case: {}
    events: Callable[[Any], Iterable[str]] = lambda case: ()
    contract: str = ""
    metamorphic: Metamorphic | None = None

    def __post_init__(self) -> None:
        unknown = self.capabilities - CAPABILITIES
        if unknown:
            raise ValueError(f"family {self.name!r}: unknown capabilities {sorted(unknown)}")


#: Built-in families: name -> "module:attribute" of its Family (imported lazily).
BUILTIN_FAMILIES: dict[str, str] = {
    "splash": "kernel_harness.families.splash.family:FAMILY",
    "hstu": "kernel_harness.families.hstu.family:FAMILY",
    "flash": "kernel_harness.families.flash.family:FAMILY",
    "sdpa": "kernel_harness.families.sdpa.family:FAMILY",
    "gpu-mha": "kernel_harness.families.gpu_mha.family:FAMILY",
    "gpu-decode": "kernel_harness.families.gpu_decode.family:FAMILY",
    "gpu-paged": "kernel_harness.families.gpu_paged.family:FAMILY",
}


def family_names() -> list[str]:
    """Names of the registered families, in registry order."""
    return list(BUILTIN_FAMILIES)


def get_family(name: str) -> Family:
    """The registered family ``name``; an unknown name is :class:`UnknownFamily`."""
    try:
        target = BUILTIN_FAMILIES[name]
    except KeyError:
        raise UnknownFamily(
            f"unknown family {name!r}; known families: {', '.join(BUILTIN_FAMILIES)}"
        ) from None
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)
