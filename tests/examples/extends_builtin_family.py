"""A user's family module that imports a built-in family to build its own from it: the
built-in is not registered twice (it is the same object), the user's family is."""

import dataclasses

from kernel_harness.families.sdpa.family import FAMILY as SDPA

FAMILY = dataclasses.replace(SDPA, name="my-sdpa")
