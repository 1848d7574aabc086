"""Toy-family implementations that kill their process natively on their second call (as a
compiler, a custom call or a GPU kernel with an illegal address can): importable as
``--impl`` targets of the ``toy`` family, and as families (``--family-module``)."""

from __future__ import annotations

import ctypes
import os

from tests.helpers.toy_family import FAMILY as TOY  # registered beside the crashing ones
from tests.helpers.toy_family import softplus

_calls = {"n": 0}


def _second_call() -> bool:
    _calls["n"] += 1
    return _calls["n"] >= 2


def segfaults(x):
    """softplus, except that the second call dereferences a null pointer (SIGSEGV)."""
    if _second_call():
        ctypes.string_at(0)
    return softplus(x)


def aborts(x):
    """softplus, except that the second call aborts the process (SIGABRT)."""
    if _second_call():
        os.abort()
    return softplus(x)


def wrong_signature(x, axis):
    """Needs an argument the toy family never passes: a usage error, not a crash."""
    return softplus(x)


def _families():
    import dataclasses


    return (dataclasses.replace(TOY, name="toy-segfault", kernel=segfaults),
            dataclasses.replace(TOY, name="toy-abort", kernel=aborts))


#: The toy family with a kernel that segfaults (aborts) on its second call
#: (``--family-module tests.helpers.crashing_impls``), and the passing toy family itself.
SEGFAULT_FAMILY, ABORT_FAMILY = _families()


def raises(x):
    """Raises on every call, from the implementation's own code."""
    raise NotImplementedError("lengths other than 4 are not supported")
