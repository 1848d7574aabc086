"""Top-level pytest configuration of the harness's own repository (not installed).

The installed plugin (``kernel_harness.plugin``) registers options only and no
Hypothesis profile. This repository's own tests want the harness profiles under
their short names, so ``--hypothesis-profile ci`` (as in ``.ci/run``) works here:
they are registered for this repository alone, and ``dev`` is loaded unless a
profile is named. The property tests apply the harness profile to themselves
either way (``kh_profile``).
"""

import os

from hypothesis import settings

from kernel_harness.run import profiles

# The suite's in-process CLI runs must not write to (or read from) the user's compile cache;
# tests of the cache pass their own directory.
os.environ.setdefault("KERNEL_HARNESS_COMPILE_CACHE", "off")

for _name in profiles.PROFILE_NAMES:
    settings.register_profile(_name, profiles.get_profile(_name))
settings.load_profile("dev")
