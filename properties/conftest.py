"""Shared helpers for the property tests: one parametrization over the registry
(built-in families, entry-point families and ``--kh-family-module`` ones)."""

from __future__ import annotations

import pytest

from kernel_harness.core.errors import UsageError
from kernel_harness.plugin import family_names_for
from kernel_harness.records.narrow import declared_without, narrow
from kernel_harness.records.registry import get_family

#: Families whose shipped kernel has a known bug the default properties would fail on
#: every run: this suite checks them with the corrected implementation, and the bug stays
#: pinned where it is asserted (the finding's standalone script under findings/ and the
#: family's own tests). A ``--kh-impl`` for the family given on the command line wins.
KNOWN_BUGGY_DEFAULTS = {
    # jax's all_gather: a slot forwarded before it arrived at 3+ devices, under the
    # interpreter's out-of-order DMA schedule (findings/tpu-all-gather-shared-recv-semaphore).
    "tpu-all-gather": "kernel_harness.kernels.all_gather_ring:all_gather",
}


def pytest_configure(config: pytest.Config) -> None:
    given = {item.split("=", 1)[0] for item in config.option.kh_impl or () if "=" in item}
    for family, impl in KNOWN_BUGGY_DEFAULTS.items():
        if family not in given:
            config.option.kh_impl = [*(config.option.kh_impl or ()), f"{family}={impl}"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "family_name" in metafunc.fixturenames:
        metafunc.parametrize("family_name", family_names_for(metafunc.config))


@pytest.fixture
def family(family_name: str, kh_families: list[str], kh_backend, kh_impls, kh_without):
    """The family under test, skipped with the reason when deselected or unsupported;
    narrowed by ``--kh-without`` and by what a ``--kh-impl`` declares it lacks."""
    if family_name not in kh_families:
        pytest.skip(f"{family_name} not selected with --kh-family")
    impl, _ = kh_impls.get(family_name, (None, None))
    try:
        fam = narrow(get_family(family_name),
                     kh_without.get(family_name, frozenset()) | declared_without(impl))
    except UsageError as e:
        raise pytest.UsageError(str(e)) from None
    if kh_backend.name not in fam.backends:
        pytest.skip(f"{family_name} does not run on backend {kh_backend.name}")
    return fam
