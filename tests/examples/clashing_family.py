"""A family module whose family takes a built-in family's name (must be refused)."""

import dataclasses

from tests.helpers.toy_family import FAMILY as _TOY

FAMILY = dataclasses.replace(_TOY, name="hstu")
