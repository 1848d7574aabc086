"""A pytest plugin (``-p tests.helpers.toy_registry``) registering the toy family, for
subprocess tests."""

from kernel_harness.records import registry

registry.BUILTIN_FAMILIES.setdefault("toy", "tests.helpers.toy_family:FAMILY")
