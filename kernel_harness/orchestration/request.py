"""What a check session is asked to do (:class:`CheckRequest`), as plain data that a
worker process can be handed."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from kernel_harness.core.errors import UsageError
from kernel_harness.orchestration.corpus.outage import spill_path_for
from kernel_harness.records import registry
from kernel_harness.records.family import Family
from kernel_harness.run.impl_probe import impl_spec_of
from kernel_harness.run.profiles import ShrinkBudget


@dataclasses.dataclass(frozen=True, kw_only=True)
class CheckRequest:
    """What to check, as every front end spells it (the CLI's flags, ``--kh-*`` options,
    :func:`kernel_harness.testing.check` arguments).

    ``families``: names or :class:`Family` objects (empty: every registered family; then a
    family the backend cannot run is skipped with the reason, while a named one is a usage
    error). ``impl``: ``MODULE:ATTR`` or a callable, replacing the kernel of exactly one
    family. ``without``: features the implementation lacks, for every family
    (``FEATURE[,FEATURE]``); ``without_by_family``: the same per family. ``isolate``: run the
    units in a worker process (a native crash is a report); ``timeout`` (seconds per example,
    implies ``isolate``); ``jobs``: that many worker processes side by side (> 1 implies
    ``isolate``).
    """

    families: Sequence[str | Family] = ()
    properties: Sequence[str] = ()
    profile: str = "dev"
    backend: str = "interpret"
    impl: str | Callable[..., Any] | None = None
    max_examples: int | None = None
    seed: int | None = None
    #: Data draws judged per compiled program (None: the profile's; docs/draws-per-compile.md).
    draws_per_compile: int | None = None
    without: Sequence[str] = ()
    without_by_family: dict[str, frozenset[str]] = dataclasses.field(default_factory=dict)
    tolerance: Sequence[str] = ()
    tolerance_scale: float | None = None
    timeout: float | None = None
    isolate: bool = False
    jobs: int = 1
    fail_fast: bool = False
    all_bugs: bool = False
    shrink_budget: ShrinkBudget | None = None
    progress_every: float = 30.0
    compile_cache: str | None = None
    heartbeat_file: str | None = None
    #: A failure corpus LOCATION (``kernel_harness.orchestration.corpus``) and whether to write to
    #: it (None: the profile decides: ci reads, dev and nightly read and write).
    corpus: str | None = None
    corpus_write: bool | None = None
    #: Where new failures go while the corpus's store cannot be reached (its spill file,
    #: :mod:`kernel_harness.orchestration.corpus.outage`), and whether a store unreachable
    #: at the start is an error (``--require-corpus``) instead.
    corpus_spill: str = dataclasses.field(default_factory=lambda: spill_path_for())
    corpus_required: bool = False
    #: ``I/N``: run this shard's 1/N of the units (each shard with its own seeds).
    shard: str | None = None
    #: Check without the features the implementation declares it lacks (its
    #: ``kernel_harness_without``); otherwise only the user's ``without`` narrows the check
    #: and a declaration is reported, not obeyed (``--accept-declared``).
    accept_declared: bool = False
    #: A ``check --json`` document of an interrupted run: its finished units are kept and
    #: only the others run (:mod:`kernel_harness.orchestration.resume`).
    resume: str | None = None
    #: Record which branches of the interpreted kernels the cases ran (docs/kernel-coverage.md).
    kernel_coverage: bool = False
    #: matches-reference starts with examples reaching every declared mode
    #: (:mod:`kernel_harness.checks.modes`; None: in the ci and nightly profiles), and a
    #: mode not reached is an error (``--require-modes``) instead of a warning.
    modes_first: bool | None = None
    require_modes: bool = False
    #: Where ``profile``, ``backend`` and ``corpus`` came from (``given``, ``config`` or
    #: ``default``: :mod:`kernel_harness.orchestration.options`); empty when built by hand.
    origins: dict[str, str] = dataclasses.field(default_factory=dict)
    #: Where ``backend`` came from, in words, for the header (``from --backend``, ``the
    #: default``...); None: ``requested explicitly``.
    backend_note: str | None = None
    #: The project's ``pyproject.toml`` (None: none configures the harness), the features
    #: its ``without`` leaves out per family (``without`` adds to them; reports say which
    #: came from the file) and its waivers of TPU-interpret findings (each entry's fields,
    #: as :mod:`kernel_harness.records.config` checked them), and its known bugs (features
    #: left out with a reason): :func:`options.check_request`.
    config_source: str | None = None
    config_without: dict[str, frozenset[str]] = dataclasses.field(default_factory=dict)
    waivers: tuple[dict[str, str], ...] = ()
    known_bugs: tuple[dict[str, Any], ...] = ()
    #: Lines of the implementation's source the project's config accepts
    #: (``[[tool.kernel-harness.accepted-source]]``: :mod:`kernel_harness.run.impl_source`).
    accepted_source: tuple[dict[str, str], ...] = ()

    def to_json_dict(self) -> dict[str, Any]:
        """The request as plain data, for a worker process (families by name, the impl by
        ``MODULE:ATTR``; an object that cannot be named there is a usage error)."""
        if self.impl is not None and not isinstance(self.impl, str):
            spec = impl_spec_of(self.impl)
            if spec is None:
                raise UsageError(
                    f"implementation {self.impl!r} cannot run in a worker process: it has no "
                    "importable MODULE:ATTR; define it at module level, or run without "
                    "isolation (no --timeout)")
        else:
            spec = self.impl
        names = []
        for fam in self.families:
            names.append(fam if isinstance(fam, str) else registry.register_family(fam))
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data.update(families=names, impl=spec, isolate=False, jobs=1, heartbeat_file=None,
                    properties=list(self.properties), without=list(self.without),
                    tolerance=list(self.tolerance),
                    without_by_family={k: sorted(v) for k, v in self.without_by_family.items()},
                    config_without={k: sorted(v) for k, v in self.config_without.items()},
                    waivers=[dict(w) for w in self.waivers],
                    accepted_source=[dict(a) for a in self.accepted_source],
                    known_bugs=[{**b, "without": list(b["without"])} for b in self.known_bugs],
                    origins=dict(self.origins),
                    shrink_budget=None if self.shrink_budget is None
                    else dataclasses.asdict(self.shrink_budget))
        return data

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> CheckRequest:
        """The inverse of :meth:`to_json_dict`."""
        data = dict(data)
        for key in ("without_by_family", "config_without"):
            data[key] = {k: frozenset(v) for k, v in data[key].items()}
        data["waivers"] = tuple(data["waivers"])
        data["accepted_source"] = tuple(data.get("accepted_source", ()))
        data["known_bugs"] = tuple({**b, "without": tuple(b["without"])}
                                   for b in data.get("known_bugs", ()))
        if data.get("shrink_budget") is not None:
            data["shrink_budget"] = ShrinkBudget(**data["shrink_budget"])
        for key in ("families", "properties", "without", "tolerance"):
            data[key] = tuple(data[key])
        return cls(**data)
