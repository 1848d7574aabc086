"""Every family's metamorphic properties (no reference needed) and its TPU lowering check.

Each runs a fraction of the profile's examples (``example_cap``); a property whose hook
the family does not provide is skipped with the reason, never passed.
"""

from __future__ import annotations

import hypothesis
import pytest

from kernel_harness.checks.metamorphic import PROPERTIES as METAMORPHIC_PROPERTIES
from kernel_harness.checks.metamorphic import example_cap
from kernel_harness.checks.properties import PROPERTIES
from kernel_harness.core.errors import PropertyNotApplicable

NAMES = [*METAMORPHIC_PROPERTIES, "lowers-for-tpu"]


@pytest.mark.parametrize("prop_name", NAMES)
def test_metamorphic(family, prop_name, kh_backend, kh_impls, kh_profile):
    impl, spec = kh_impls.get(family.name, (None, None))
    try:
        prop = PROPERTIES[prop_name](family, backend=kh_backend, impl=impl, impl_spec=spec)
    except PropertyNotApplicable as e:
        pytest.skip(str(e))
    cap = example_cap(prop, kh_profile.max_examples)
    hypothesis.settings(kh_profile, max_examples=cap)(prop)()
