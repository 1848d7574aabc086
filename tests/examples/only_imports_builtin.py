"""A family module that only imports a built-in family: it declares none of its own."""

from kernel_harness.families.sdpa.family import FAMILY  # noqa: F401
