"""Hypothesis profiles shared by pytest and the CLI (``--profile``).

``dev``: a quick look while editing. ``ci``: derandomized, no deadline, a
bounded number of examples so the suite fits its time budget on 2 cores.
``nightly``: many examples from a random seed, on accelerators overnight.

The harness is a guest in other people's test runs: importing this module
registers nothing and loads nothing. The profiles' Hypothesis names are
namespaced (``kernel-harness-ci``...) so they cannot collide with a project's
own ``ci`` profile; the harness applies them to its own properties
(:func:`pytest_profile` maps pytest's options to one) and never touches
``settings.default``.

Every profile stops generating at the first failing example
(``report_multiple_bugs=False``: one bug per property is enough to act on, and
Hypothesis would otherwise keep drawing, compiling a kernel per draw, for up to as many
examples again). Shrinking is bounded by the profile's :class:`ShrinkBudget` (Hypothesis
has no per-run shrink time limit; ``kernel_harness.checks.shrinking`` enforces it).
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, Phase, settings

#: Short names, as ``kernel-harness check --profile`` and ``--kh-profile`` take them.
PROFILE_NAMES: tuple[str, ...] = ("dev", "ci", "nightly")

#: Prefix of the Hypothesis profile names (``kernel-harness-ci``).
HYPOTHESIS_PREFIX = "kernel-harness-"

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]

_PROFILES = {
    # No profile keeps Hypothesis's example database (a .hypothesis/ folder in whatever
    # directory the run starts in): a stale one replays an old failure as if it were this
    # run's, reported without shrinking, and a user's folder is left with files nobody
    # asked for. What a run finds is kept in the harness's corpus (--corpus), which
    # survives a change of strategy (docs/corpus.md).
    "dev": settings(
        max_examples=6, deadline=None, database=None, suppress_health_check=_SLOW_OK,
        print_blob=True, report_multiple_bugs=False,
    ),
    "ci": settings(
        max_examples=30,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=_SLOW_OK,
        print_blob=True,
        report_multiple_bugs=False,
        # No "explain": it reruns failing examples many times, which is slow here.
        phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink),
    ),
    "nightly": settings(
        max_examples=300, deadline=None, database=None, suppress_health_check=_SLOW_OK,
        print_blob=True, report_multiple_bugs=False,
    ),
}


def hypothesis_name(short: str) -> str:
    """The namespaced Hypothesis profile name of harness profile ``short`` (``ci`` ->
    ``kernel-harness-ci``)."""
    return HYPOTHESIS_PREFIX + short


def short_name(name: str) -> str | None:
    """``ci`` for ``ci`` or ``kernel-harness-ci``; None when ``name`` is no harness profile."""
    if name.startswith(HYPOTHESIS_PREFIX):
        name = name[len(HYPOTHESIS_PREFIX):]
    return name if name in _PROFILES else None


@dataclasses.dataclass(frozen=True)
class ShrinkBudget:
    """How long a property may shrink after its first failing example: at most ``seconds``
    of wall time and ``steps`` test calls (each call may compile a kernel). When either runs
    out, the smallest failing example found so far is reported, marked as not minimal."""

    seconds: float
    steps: int

    def __post_init__(self) -> None:
        if self.seconds < 0 or self.steps < 0:
            raise ValueError(f"a shrink budget needs seconds >= 0 and steps >= 0, got {self!r}")

    def __str__(self) -> str:
        return f"{self.seconds:g}s / {self.steps} steps"

    @classmethod
    def parse(cls, text: str) -> ShrinkBudget:
        """``SECONDS/STEPS`` (``30/40``, ``30s/40``) as ``--shrink-budget`` takes it; ``0``:
        no shrinking (the first failing example is reported as found). A malformed value is
        a ValueError saying what to write."""
        value = text.strip().lower()
        if value == "0":
            return cls(seconds=0.0, steps=0)
        seconds, sep, steps = value.partition("/")
        try:
            if not sep:
                raise ValueError
            budget = cls(seconds=float(seconds.strip().removesuffix("s")),
                         steps=int(steps.strip()))
        except ValueError:
            raise ValueError(
                f"shrink budget {text!r}: write SECONDS/STEPS (e.g. 30/40: at most 30 s and "
                "40 shrink steps after the first failure), or 0 for no shrinking") from None
        if not budget.seconds < float("inf"):
            raise ValueError(f"shrink budget {text!r}: the seconds must be finite")
        return budget


#: Per profile. ci: a failing property costs at most about this much beyond finding the
#: failure, so a red CI check stays within about 2x a green one (README, "Speed").
SHRINK_BUDGETS: dict[str, ShrinkBudget] = {
    "dev": ShrinkBudget(seconds=20.0, steps=25),
    "ci": ShrinkBudget(seconds=30.0, steps=40),
    "nightly": ShrinkBudget(seconds=300.0, steps=500),
}


#: Per profile: data draws ``matches-reference`` judges per compiled static configuration
#: (``kernel_harness.checks.draws``). A draw costs milliseconds of running beside the
#: seconds of compiling its configuration in splash (docs/draws-per-compile.md), but not in
#: every family: flash's dev run took 1.7x the time for 3.6x the checks (45.6 s at K=1 vs
#: 74.6 s at K=4, 2026-12-01), so dev, the quick look while editing (README command 1), keeps 1.
DRAWS_PER_COMPILE: dict[str, int] = {"dev": 1, "ci": 4, "nightly": 4}


def draws_per_compile(name: str) -> int:
    """The data draws per compiled program of profile ``name``; an unknown name is a clear
    ValueError."""
    get_profile(name)
    return DRAWS_PER_COMPILE[short_name(name)]


@dataclasses.dataclass(frozen=True)
class LargeSizeBudget:
    """What the ``large-sizes`` property runs under a profile: ``examples`` examples (each
    one case per claimed size, run in interpret mode and compared with the reference), at
    sizes capped by the family's tier ``tier`` (``Claim.large.tiers``: the family says what
    its kernel can afford there, and why)."""

    examples: int
    tier: str


#: Per profile (``kernel_harness.checks.large_sizes``). ci: 2 examples at the ci tier's caps
#: (the first at the caps, one drawn below them), the cheapest sizes past the drawn range
#: that a per-push run can pay for (measured: docs/kernel-ran.md, "At every size it
#: claims?"); nightly: 8 examples at the nightly tier's larger caps; dev: 1 example. A
#: family's tier may run fewer (``Tier.examples``: megablox-gmm's ci tier, 1).
LARGE_SIZES: dict[str, LargeSizeBudget] = {
    "dev": LargeSizeBudget(examples=1, tier="ci"),
    "ci": LargeSizeBudget(examples=2, tier="ci"),
    "nightly": LargeSizeBudget(examples=8, tier="nightly"),
}


def large_sizes(settings_or_name: settings | str | None) -> LargeSizeBudget:
    """The large-size budget of a profile, given by name or as its settings (the object
    :func:`get_profile` returns); anything else (a caller's own settings) gets ci's."""
    if isinstance(settings_or_name, str):
        get_profile(settings_or_name)
        return LARGE_SIZES[short_name(settings_or_name)]
    for name, profile in _PROFILES.items():
        if settings_or_name is profile:
            return LARGE_SIZES[name]
    return LARGE_SIZES["ci"]


def register_profiles() -> None:
    """Registers the namespaced profiles (``kernel-harness-dev|ci|nightly``) with
    Hypothesis (idempotent). Never registers a bare ``ci`` and never loads a profile."""
    for name, profile in _PROFILES.items():
        settings.register_profile(hypothesis_name(name), profile)


def get_profile(name: str) -> settings:
    """The settings of harness profile ``name`` (``ci`` or ``kernel-harness-ci``);
    an unknown name is a clear ValueError."""
    short = short_name(name)
    if short is None:
        raise ValueError(f"unknown profile {name!r}; choose one of: {', '.join(PROFILE_NAMES)}")
    return _PROFILES[short]


def pytest_profile(kh_profile: str | None, hypothesis_profile: str | None) -> str:
    """The harness profile the pytest properties run under (a short name).

    ``--kh-profile P`` wins; else ``--hypothesis-profile NAME`` when NAME is a harness
    profile (``ci`` or ``kernel-harness-ci``; the project's own ``ci`` still applies to
    its own tests); else ``dev``. An unknown ``--kh-profile`` is a ValueError.
    """
    if kh_profile:
        short = short_name(kh_profile)
        if short is None:
            raise ValueError(
                f"unknown --kh-profile {kh_profile!r}; choose one of: {', '.join(PROFILE_NAMES)}"
            )
        return short
    if hypothesis_profile:
        short = short_name(hypothesis_profile)
        if short is not None:
            return short
    return "dev"


def shrink_budget(name: str) -> ShrinkBudget:
    """The shrink budget of profile ``name``; an unknown name is a clear ValueError."""
    get_profile(name)
    return SHRINK_BUDGETS[short_name(name)]
