"""Every family that declares its modes (``Family.modes``) reaches each of them in a
derandomized draw of the ``ci`` profile's size (issue 23: a mode drawn only at sizes where
it cannot go wrong, or not at all in a ci run, proves nothing)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from kernel_harness.run.profiles import get_profile
from kernel_harness.spec.registry import family_names, get_family

WITH_MODES = [n for n in family_names() if get_family(n).modes]


def test_the_attention_families_declare_their_modes():
    assert {"splash", "flash", "sdpa", "gpu-mha", "hstu"} <= set(WITH_MODES)


@pytest.mark.parametrize("name", WITH_MODES)
def test_a_ci_draw_reaches_every_declared_mode(name):
    fam = get_family(name)
    ci = get_profile("ci")
    seen: set[str] = set()

    @settings(ci, max_examples=ci.max_examples, suppress_health_check=list(HealthCheck))
    @given(fam.cases())
    def collect(case):
        seen.update(fam.events(case))

    collect()
    assert fam.modes <= seen, f"{name}: a ci draw never reaches {sorted(fam.modes - seen)}"
