"""Top-level pytest configuration of the harness's own repository (not installed).

The installed plugin (``kernel_harness.plugin``) registers options only and no
Hypothesis profile. This repository's own tests want the harness profiles under
their short names, so ``--hypothesis-profile ci`` (as in ``.ci/run``) works here:
they are registered for this repository alone, and ``dev`` is loaded unless a
profile is named. The property tests apply the harness profile to themselves
either way (``kh_profile``).
"""

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from kernel_harness.run import profiles

# The suite's in-process CLI runs must not write to (or read from) the user's compile cache;
# tests of the cache pass their own directory.
os.environ.setdefault("KERNEL_HARNESS_COMPILE_CACHE", "off")

for _name in profiles.PROFILE_NAMES:
    settings.register_profile(_name, profiles.get_profile(_name))
settings.load_profile("dev")


@pytest.fixture(autouse=True)
def _family_modules_do_not_leak() -> Iterator[None]:
    """Loading an out-of-tree family records its module in $KERNEL_HARNESS_FAMILY_MODULES
    (so child processes find it); one test's family must not reach the next test's
    subprocesses, where it may not be importable."""
    before = os.environ.get("KERNEL_HARNESS_FAMILY_MODULES")
    yield
    if before is None:
        os.environ.pop("KERNEL_HARNESS_FAMILY_MODULES", None)
    else:
        os.environ["KERNEL_HARNESS_FAMILY_MODULES"] = before
