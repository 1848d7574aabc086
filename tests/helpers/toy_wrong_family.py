"""The toy family whose own kernel is wrong (a mutate control that fails), in a module of
its own: tests that load tests.helpers.toy_family as a family module see one family."""

import dataclasses

from tests.helpers.toy_family import FAMILY, wrong_softplus

WRONG = dataclasses.replace(FAMILY, name="toy-wrong", kernel=wrong_softplus)
