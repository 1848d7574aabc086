"""Shared helpers for the property tests: one parametrization over the registry
(built-in families, entry-point families and ``--kh-family-module`` ones)."""

from __future__ import annotations

import pytest

from kernel_harness.plugin import family_names_for
from kernel_harness.spec.registry import get_family


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "family_name" in metafunc.fixturenames:
        metafunc.parametrize("family_name", family_names_for(metafunc.config))


@pytest.fixture
def family(family_name: str, kh_families: list[str], kh_backend):
    """The family under test, skipped with the reason when deselected or unsupported."""
    if family_name not in kh_families:
        pytest.skip(f"{family_name} not selected with --kh-family")
    fam = get_family(family_name)
    if kh_backend.name not in fam.backends:
        pytest.skip(f"{family_name} does not run on backend {kh_backend.name}")
    return fam
