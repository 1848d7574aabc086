"""Every family's harness properties (matches-reference, the metamorphic relations, TPU
lowering), one test per family and property, through the same session and collection as
``pytest --kh-check`` and ``kernel-harness check`` (``kh_unit``: kernel_harness.testing).

Options: ``--kh-family`` narrows the families, ``--kh-property`` the properties, and the
other ``--kh-*`` options apply (profile, backend, impl, without, tolerance...). A property a
family has no hook for is a skip with the reason, never a pass.

Nightly (``nightly``: CI deselects them; docs/ci.md, "What CI leaves to the nightly"): they
check the built-in kernels on drawn cases, not the harness; per push every family's golden
cases run on both stacks (``test_golden.py`` here, ``gate --goldens`` in ``.ci/run``).
"""

import pytest

pytestmark = pytest.mark.nightly


def test_unit(kh_unit):
    kh_unit.check()
