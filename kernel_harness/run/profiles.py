"""Hypothesis profiles shared by pytest (``--hypothesis-profile``) and the CLI (``--profile``).

``dev``: a quick look while editing. ``ci``: derandomized, no deadline, a
bounded number of examples so the suite fits its time budget on 2 cores.
``nightly``: many examples from a random seed, on accelerators overnight.
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings

PROFILE_NAMES: tuple[str, ...] = ("dev", "ci", "nightly")

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]

_PROFILES = {
    "dev": settings(
        max_examples=6, deadline=None, suppress_health_check=_SLOW_OK, print_blob=True
    ),
    "ci": settings(
        max_examples=30,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=_SLOW_OK,
        print_blob=True,
        # No "explain": it reruns failing examples many times, which is slow here.
        phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink),
    ),
    "nightly": settings(
        max_examples=300, deadline=None, suppress_health_check=_SLOW_OK, print_blob=True
    ),
}


def register_profiles() -> None:
    """Registers the harness profiles with Hypothesis (idempotent)."""
    for name, profile in _PROFILES.items():
        settings.register_profile(name, profile)


def get_profile(name: str) -> settings:
    """The settings of profile ``name``; an unknown name is a clear ValueError."""
    if name not in _PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose one of: {', '.join(PROFILE_NAMES)}")
    return _PROFILES[name]


register_profiles()
