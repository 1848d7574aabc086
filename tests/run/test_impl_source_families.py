"""The source check reads no line of a built-in family's kernel that fails it, on either
stack (the second holds the libraries that need Python >= 3.12: deltanet-tpu, flywheel-tpu).
A family adapter passes the call on; a library module it binds is not read (deltanet-tpu's
gdn2.py has Tracer checks and a warning's stack frame that would fail every example)."""

from __future__ import annotations

from kernel_harness.records import registry
from kernel_harness.run import impl_source


def test_every_built_in_family_kernel_has_no_finding():
    families, _ = registry.importable_families()
    assert families
    for family in families:
        assert impl_source.findings(family.kernel) == (), family.name
