"""Every family's outputs and gradients match its independent reference."""

from __future__ import annotations

from kernel_harness.checks.properties import matches_reference


def test_matches_reference(family, kh_backend, kh_impls):
    impl, spec = kh_impls.get(family.name, (None, None))
    matches_reference(family, backend=kh_backend, impl=impl, impl_spec=spec)()
