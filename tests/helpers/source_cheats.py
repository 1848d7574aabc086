"""Implementations whose deciding line is outside the function a check calls (import-time
code, a class's method, a name computed from ``interpret``, a clock read through strftime,
a counter without "+="; round 6: a lookup of sys by a computed name, a counter kept in a
file, a clock read through uuid1), and one honest kernel wrapper:
tests/run/test_source_reach.py."""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid

import jax.numpy as jnp

#: Decided once, when the module is imported: the function only reads a bool.
_CHECKED = any(m.split(".")[0] == "kernel" + "_harness" for m in list(sys.modules))


def import_time_observer(x, *, interpret=False):
    return x if _CHECKED else x.astype(jnp.bfloat16).astype(x.dtype)


class _Calls:
    count = [0]

    @staticmethod
    def tick():
        _Calls.count[0] = _Calls.count[0] + 1
        return _Calls.count[0]


def class_counter(x, *, interpret=False):
    return x * (1.0 if _Calls.tick() < 1000 else 1.01)


_SEEN: list[int] = []


def list_counter(x, *, interpret=False):
    _SEEN.append(1)
    return x if len(_SEEN) < 1000 else -x


def derived_backend(x, *, interpret=False):
    compiled = interpret is False
    return _scaled(x, compiled)


def _scaled(x, low):
    return x.astype(jnp.bfloat16).astype(x.dtype) if low else x


def indexed_backend(x, *, interpret=False):
    return (x, x.astype(jnp.bfloat16).astype(x.dtype))[interpret is False]


def strftime_bomb(x, *, interpret=False):
    return x if time.strftime("%Y") < "2027" else -x


def computed_lookup(x, *, interpret=False):
    mods = getattr(sys, "mod" + "ules")
    return x if "kernel" + "_harness" in mods else -x


_LOG = os.path.join(tempfile.gettempdir(), "kh-source-cheat.log")


def file_counter(x, *, interpret=False):
    with open(_LOG, "a") as log:
        log.write(".")
    return x if os.path.getsize(_LOG) < 1000 else -x


def uuid_clock(x, *, interpret=False):
    return x if uuid.uuid1().time < 0x1F0000000000000 else -x


def honest(x, *, interpret=False):
    """Passes the setting on, as kernels do: nothing to find."""
    params = {"debug": False}
    interpret_params = dict(params) if interpret else False
    return _call(x, interpret=interpret_params or interpret)


def _call(x, *, interpret):
    return x


def honest_packer(x, *, interpret=False):
    """Packs the setting with the others to pass it on (round 7's mha wrapper did): nothing
    to find."""
    args = (2.0, interpret)
    return _apply(x, *args)


def _apply(x, scale, interpret):
    return _call(x * scale, interpret=interpret)


def packed_then_tested(x, *, interpret=False):
    """Packs the setting, then tests the packed element: a branch on `interpret`."""
    opts = (2.0, interpret)
    return x if opts[1] else x.astype(jnp.bfloat16).astype(x.dtype)
