"""A pytest plugin (``-p tests.toy_registry``) registering the toy family, for subprocess tests."""

from kernel_harness import family

family.BUILTIN_FAMILIES.setdefault("toy", "tests.toy_family:FAMILY")
