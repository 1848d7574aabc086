"""Every family that declares its modes (``Family.modes``) reaches each of them in draws of
the ``ci`` profile's size (issue 23: a mode drawn only at sizes where it cannot go wrong, or
not at all in a ci run, proves nothing). Counted over several seeded ci-sized runs
(tests/helpers/mode_reach.py says why not one derandomized run)."""

from __future__ import annotations

import pytest

from kernel_harness.spec.registry import family_names, get_family
from tests.helpers.mode_reach import assert_reaches, family_reach

WITH_MODES = [n for n in family_names() if get_family(n).modes]


def test_the_attention_families_declare_their_modes():
    assert {"splash", "flash", "sdpa", "gpu-mha", "hstu"} <= set(WITH_MODES)


@pytest.mark.parametrize("name", WITH_MODES)
def test_a_ci_draw_reaches_every_declared_mode(name):
    assert_reaches(family_reach(name), get_family(name).modes, name)
