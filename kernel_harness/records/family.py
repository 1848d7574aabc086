"""The frozen Family record.

A family pairs a kernel with everything needed to check it: the adapter that
runs an implementation on a backend, an independent reference, a case
strategy, a tolerance table, output axis names and declared capabilities.
The registry of families lives in :mod:`kernel_harness.records.registry`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from hypothesis.strategies import SearchStrategy

from kernel_harness.core.backends import Backend
from kernel_harness.core.case import DTYPES, Arrays, Case
from kernel_harness.core.tolerance import ToleranceTable
from kernel_harness.records.bad_input import BadInput
from kernel_harness.records.bench import Bench
from kernel_harness.records.claims import Claim
from kernel_harness.records.export import ExportSnippet
from kernel_harness.records.hooks import Metamorphic
from kernel_harness.records.kernels import KernelExpectation
from kernel_harness.records.outside import OutsideKernel
from kernel_harness.records.relations import Relation

#: Capability names a family may declare (``kernel-harness list`` prints them).
CAPABILITIES: frozenset[str] = frozenset(
    {
        "causal", "full", "local-window", "chunked-causal", "numpy-mask", "segments",
        "gqa", "mqa", "soft-cap", "sinks", "bias", "sm-scale", "residuals", "layouts",
        "q-len-ne-kv-len", "ragged-lengths", "decode", "paged", "gradients",
    }
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Family:
    """Everything the harness needs to check one kernel family.

    Attributes:
      name: short name used on the command line (``splash``).
      summary: one line saying what kernel this is.
      case_type: the family's :class:`~kernel_harness.core.case.Case` subclass.
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
        not named are compared whole. One of the three uses of the contract's
        **exclusion** (what lies outside it): ``valid`` (not judged there),
        :attr:`Metamorphic.may_be_nonfinite` (may be NaN there) and
        :attr:`Metamorphic.constrain` (inputs put back inside it after a change). An op
        states its exclusion once and derives the three (the attention problem's
        ``rows_outside``, the ragged op's ``excluded``); a family does not restate it.
      events: ``events(case) -> labels`` counted to show what the cases reach.
      contract: the family's semantic choices, in words (fully masked rows...).
      metamorphic: hooks for the metamorphic properties, lowering and sharding
        (:class:`kernel_harness.records.hooks.Metamorphic`); None opts out.
      bench: how ``kernel-harness bench`` builds and times a case at a given length
        (:class:`kernel_harness.records.bench.Bench`); None opts out.
      optional: features an implementation may declare it does not support,
        ``{name: what the strategy then stops drawing}``; ``cases(without=...)``
        must accept a frozenset of these names (see :mod:`kernel_harness.records.narrow`).
      narrowed: ``narrowed(family, without) -> family``: what else than the strategy a
        missing optional feature changes (outputs not compared, the metamorphic block
        variants); :func:`kernel_harness.records.narrow.narrow` applies it after ``cases``.
      modes: the events naming the kernel's modes (its paths, at sizes where their bugs
        show) that ``ci``-sized draws of :attr:`cases` must reach (at least 3 draws in
        10 seeded ci-sized runs); tested per family (``tests/families/test_modes.py``).
      nondegenerate: ``{mode: (why, case -> bool)}``: what a case must also do, beyond
        reaching the mode's event, to be able to show a bug there (several kv heads per
        core, a row with tokens on each core...); :mod:`kernel_harness.checks.modes` runs
        one such case per mode first in ci and nightly runs.
      mode_cases: ``{mode: () -> strategy}``: cases drawn inside a mode that the family's
        strategy reaches too rarely to count on (one draw in forty or fewer); the modes
        cover draws from it when the free draws did not reach the mode.
      without: features this (narrowed) family does not draw; empty for the
        registered family.
      adjustments: command-line flags that changed this family from its
        registered form (``--tolerance out:bfloat16=0.02``); every repro command
        carries them, so a loosened run is never mistaken for a default one.
      export: ``export(case) -> ExportSnippet``: source text for a standalone repro
        script (``kernel-harness export-repro``); None opts out.
      slice_axes: per output, the axes indexing independent results, where
        :func:`kernel_harness.core.compare.derive_slice_axes` (every axis but
        ``dim``; rows of a ``[query, key]`` output) would be wrong.
      nonfinite_reference_ok: outputs whose contract allows non-finite reference
        values inside ``valid`` (compared by position); elsewhere one is an error.
      seed_cases: ``seed_cases(without) -> cases``: hand-made cases reaching paths that a
        short random run can miss (a partial last batch block...); every matches-reference
        run tries them first, as Hypothesis explicit examples, in every profile. They must
        not use the features in ``without`` (the family's :attr:`without`).
      aimed: ``aimed(constant, without) -> cases``: cases whose values reach just past
        ``constant`` (a logit, a spread, an eps a hair beyond it), for the floating
        constants an ``--impl`` holds and the family's kernel does not
        (:mod:`kernel_harness.checks.aimed`); None: none are aimed.
      same_as: extra outputs the adapter returns that must equal another output, judged
        against that output's reference, axes and tolerance, e.g. ``{"out_vjp": "out"}``
        (the primal of ``jax.vjp``): everything the kernel produces is checked.
      not_compared: ``not_compared(case) -> {output: reason}``: outputs that for this case
        exist only as constants the adapter supplies on both sides (e.g. ``dbias`` of a
        case without bias); they are reported as not compared, never as a passed check.
      coverage_expected_missing: kernel-branch outcomes this family's cases are not expected
        to reach, ``{pattern: reason}`` (an ``fnmatch`` glob over an outcome's label, see
        :mod:`kernel_harness.run.kernel_coverage`); ``check --kernel-coverage`` lists any
        other never-seen outcome as MISSING.
      data_draws: ``data_draws(case) -> strategy`` of cases that share ``case``'s compiled
        programs (equal ``static_key()``) and are valid draws of :attr:`cases`: other data
        seeds, logit scales, any data-only field. ``matches-reference`` judges
        ``draws_per_compile`` of them per compiled configuration. None: only the seed
        varies, which is valid unless the strategy's filters (``assume``) read values the
        seed makes (a random mask): such a family must give ``data_draws``.
      kernels: the fewest Pallas kernels a real implementation launches per call, forward
        and backward (:class:`~kernel_harness.records.kernels.KernelExpectation`); an example
        below it fails unless the implementation declares a fallback. None: the family's
        kernel is not Pallas by design (XLA, torch), and nothing is counted.
      outside_kernel: what the implementation may compute outside its Pallas kernels,
        forward and backward, each primitive with its reason
        (:class:`~kernel_harness.records.outside.OutsideKernel`; default: nothing beyond
        layout). Other matmuls, transcendentals, reductions or divisions on arrays of the
        problem's size, or host callbacks, outside every kernel fail the example ("math
        outside the kernel"). Measured where ``kernels`` is set.
      requires: what must be installed for the family to have a backend, with the command
        (``"torch: pip install 'kernel-harness[torch]'"``); ``list`` shows it where the
        family has no backend here.
      bad_inputs: ``bad_inputs() -> [BadInput]``: invalid configurations of the kernel,
        each of which must raise a clear error (:mod:`kernel_harness.records.bad_input`;
        ``kernel-harness bad-input``); None: the family lists none.
      devices: the most devices a case runs on (a collective kernel's mesh; 1: one
        device). Each example needs that many on the backend's platform
        (:mod:`kernel_harness.core.devices`); a process with fewer is an error, never a
        smaller mesh.
      relations: the op's metamorphic relations (:class:`~kernel_harness.records.relations.
        Relation`), each run as a property of its own name, besides the built-in ones.
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
    bench: Bench | None = None
    #: The largest sizes the kernel is meant for, traced abstractly by ``claimed-sizes``
    #: (:class:`~kernel_harness.records.claims.Claim`); None: none declared (a SKIP).
    claimed: Claim | None = None
    #: Why the kernel's result may differ from run to run on the same inputs (atomics, an
    #: unordered reduction...); empty: deterministic, and matches-reference reruns the
    #: first example of each compiled program and requires it bit for bit.
    nondeterministic: str = ""
    optional: Mapping[str, str] = dataclasses.field(default_factory=dict)
    without: frozenset[str] = frozenset()
    narrowed: Callable[[Family, frozenset[str]], Family] | None = None
    modes: frozenset[str] = frozenset()
    nondegenerate: Mapping[str, tuple[str, Callable[[Any], bool]]] = dataclasses.field(
        default_factory=dict)
    mode_cases: Mapping[str, Callable[[], SearchStrategy[Any]]] = dataclasses.field(
        default_factory=dict)
    adjustments: tuple[str, ...] = ()
    export: Callable[[Any], ExportSnippet] | None = None
    slice_axes: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    nonfinite_reference_ok: frozenset[str] = frozenset()
    same_as: Mapping[str, str] = dataclasses.field(default_factory=dict)
    seed_cases: Callable[[frozenset[str]], Sequence[Any]] = lambda without: ()
    aimed: Callable[[float, frozenset[str]], Sequence[Any]] | None = None
    not_compared: Callable[[Any], Mapping[str, str]] = lambda case: {}
    low_precision_reference: Callable[[Any, Arrays, Backend], Arrays] | None = None
    coverage_expected_missing: Mapping[str, str] = dataclasses.field(default_factory=dict)
    data_draws: Callable[[Any], SearchStrategy[Any]] | None = None
    relations: tuple[Relation, ...] = ()
    kernels: KernelExpectation | None = None
    outside_kernel: OutsideKernel = dataclasses.field(default_factory=OutsideKernel)
    bad_inputs: Callable[[], Sequence[BadInput]] | None = None
    requires: str = ""
    devices: int = 1

    def relation(self, name: str) -> Relation | None:
        """The relation called ``name``, or None."""
        return next((r for r in self.relations if r.name == name), None)

    def calibrated_dtypes(self) -> frozenset[str]:
        """The dtypes for which some output is judged by the calibrated bound."""
        return frozenset(d for (d, _), t in self.tolerances.entries.items()
                         if t.calibrated is not None)

    def __post_init__(self) -> None:
        if self.calibrated_dtypes() and self.low_precision_reference is None:
            raise ValueError(f"family {self.name!r}: its tolerances declare the calibrated "
                             "judge but it has no low_precision_reference")
        unknown = self.capabilities - CAPABILITIES
        if unknown:
            raise ValueError(f"family {self.name!r}: unknown capabilities {sorted(unknown)}")
        names = [r.name for r in self.relations]
        if len(set(names)) != len(names):
            raise ValueError(f"family {self.name!r}: relation names repeat: {names}")
        stray = (set(self.nondegenerate) | set(self.mode_cases)) - self.modes
        if stray:
            raise ValueError(f"family {self.name!r}: nondegenerate or mode_cases name modes it "
                             "does not "
                             f"declare: {sorted(stray)}")
        if self.outside_kernel.by_design and self.kernels is not None:
            raise ValueError(f"family {self.name!r}: outside_kernel says its kernel is not "
                             "Pallas by design, but it expects Pallas kernels")
        unknown = self.without - set(self.optional) - set(DTYPES)  # a dtype: spec.narrow
        if unknown:
            raise ValueError(f"family {self.name!r}: cannot draw without {sorted(unknown)}")
