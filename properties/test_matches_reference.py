"""Every family's outputs and gradients match its independent reference."""

from __future__ import annotations

import hypothesis

from kernel_harness.checks.properties import matches_reference


def test_matches_reference(family, kh_backend, kh_impls, kh_profile):
    impl, spec = kh_impls.get(family.name, (None, None))
    prop = matches_reference(family, backend=kh_backend, impl=impl, impl_spec=spec)
    hypothesis.settings(kh_profile)(prop)()
