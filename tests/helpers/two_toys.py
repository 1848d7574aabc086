"""Two toy families for fleet tests (``--family-module tests.helpers.two_toys``): ``toy`` and
``toy-b``, whose kernel has the length-8 bug of ``toy_impls.wrong_at_length_8``."""

import dataclasses

from tests.helpers.toy_family import FAMILY as TOY
from tests.helpers.toy_impls import wrong_at_length_8

TOY_B = dataclasses.replace(TOY, name="toy-b", kernel=wrong_at_length_8)
