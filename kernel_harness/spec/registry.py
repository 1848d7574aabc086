"""The registry of families: the built-in ones, found by name, imported lazily.

Adding a family is one folder under ``kernel_harness/families`` and one line in
:data:`BUILTIN_FAMILIES`.
"""

from __future__ import annotations

import importlib

from kernel_harness.spec.family import Family


class UnknownFamily(KeyError):
    """No family of that name is registered."""

    def __str__(self) -> str:
        return str(self.args[0])


#: Built-in families: name -> "module:attribute" of its Family (imported lazily).
BUILTIN_FAMILIES: dict[str, str] = {
    "splash": "kernel_harness.families.splash.family:FAMILY",
    "hstu": "kernel_harness.families.hstu.family:FAMILY",
    "flash": "kernel_harness.families.flash.family:FAMILY",
    "sdpa": "kernel_harness.families.sdpa.family:FAMILY",
    "gpu-mha": "kernel_harness.families.gpu_mha.family:FAMILY",
    "gpu-decode": "kernel_harness.families.gpu_decode.family:FAMILY",
    "gpu-paged": "kernel_harness.families.gpu_paged.family:FAMILY",
    "megablox-gmm": "kernel_harness.families.megablox_gmm.family:FAMILY",
}


def family_names() -> list[str]:
    """Names of the registered families, in registry order."""
    return list(BUILTIN_FAMILIES)


def get_family(name: str) -> Family:
    """The registered family ``name``; an unknown name is :class:`UnknownFamily`."""
    try:
        target = BUILTIN_FAMILIES[name]
    except KeyError:
        raise UnknownFamily(
            f"unknown family {name!r}; known families: {', '.join(BUILTIN_FAMILIES)}"
        ) from None
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)
