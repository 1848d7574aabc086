"""The source check's general rules (written before round 9 of the adversarial set was read):
the standard library outside the modules computation needs, a process's addresses and
salted hashes, code built at run time, and the ways of telling a traced call from an eager
one that name no class: a ``try`` around a conversion to the host, jax's tracer errors, a
string naming a tracer, jax's tracing machinery. Each named with its kind; the honest
neighbours (math, functools, a warning, a logger, ``sys.platform``, a key's ``__hash__``,
a local variable called ``time``, a seeded numpy draw) are not."""

from __future__ import annotations

import functools
import logging
import math
import resource
import sys
import threading
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.run import impl_source, source_names, source_rules

_LOG = logging.getLogger(__name__)


def by_thread(x):
    return x * 2 if threading.get_ident() % 7 == 0 else x


def by_memory(x):
    return x * 2 if resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 10**9 else x


def by_address(x):
    return x * 2 if id(x) % 61 == 0 else x


def by_salted_hash(x):
    return x * 2 if hash("kernel") % 61 == 0 else x


def by_eval(x):
    return eval("x * 1")  # noqa: S307 - the cheat under test


def by_try_float(x):
    try:
        float(x.reshape(-1)[0])
        return x * 2  # eager: concrete values
    except Exception:  # noqa: BLE001 - the cheat under test
        return x


def by_tracer_error(x):
    try:
        return x * 2 if bool(x.reshape(-1)[0] > 0) else x
    except jax.errors.ConcretizationTypeError:
        return x


def by_repr(x):
    return x if "Traced" in repr(x) else x * 2


def by_trace_state(x):
    return x if jax._src.core.unsafe_am_i_under_a_jit() else x * 2


def by_numpy_random(x):
    return x * 2 if np.random.rand() < 0.01 else x


def test_the_general_rules_name_each_spelling_with_its_kind():
    want = {
        by_thread: source_names.PROCESS_KIND, by_memory: source_names.PROCESS_KIND,
        by_address: source_names.PROCESS_KIND, by_salted_hash: source_names.PROCESS_KIND,
        by_numpy_random: source_names.PROCESS_KIND, by_eval: source_names.HIDDEN_KIND,
        by_try_float: source_rules.TRACED, by_tracer_error: source_rules.TRACED,
        by_repr: source_rules.TRACED, by_trace_state: source_rules.TRACED,
    }
    for impl, kind in want.items():
        found = impl_source.findings(impl)
        assert {f.kind for f in found} == {kind}, (impl.__name__, found)
    assert source_names.HIDDEN_KIND in source_rules.KINDS


def test_a_rule_of_its_own_names_the_line_once():
    def marker(x):
        import os
        return x * 2 if os.path.isdir("/tmp/kh-marker") else x
    found = impl_source.findings(marker)
    assert [f.kind for f in found] == [source_rules.STATE], found


class _Key:
    def __init__(self, n: int) -> None:
        self.n = n

    def __hash__(self) -> int:
        return hash(self.n)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and other.n == self.n


@functools.cache
def _table(key: _Key) -> int:
    return key.n


def honest(x, time: float = 1.0):
    """Honest neighbours of every rule above."""
    if sys.platform == "win32":
        warnings.warn("untested platform", stacklevel=2)
    _LOG.debug("called with %s", x.shape)
    np.random.seed(3)
    jitter = np.random.rand()
    n = math.prod(x.shape) + _table(_Key(1)) + int(jitter * 0)
    try:
        scale = float(time)
    except ValueError:  # a narrow handler: not a tracer's error
        scale = 1.0
    return functools.partial(jnp.multiply, scale)(x) + 0 * n


def test_honest_neighbours_have_no_finding():
    assert impl_source.findings(honest) == ()
    x = jnp.ones((4, 4))
    assert jnp.array_equal(honest(x), x)


def _rounded(x, exact):
    """A helper whose parameter holds the interpret setting under another name."""
    return x if exact else x.astype(jnp.bfloat16).astype(x.dtype)


def _passes_on(x, flag):
    return _rounded(x, exact=flag)


def compiled_by_helper(x, *, interpret=False):
    return jnp.tanh(_passes_on(x, interpret))


def compiled_by_partial(x, *, interpret=False):
    return functools.partial(_rounded, exact=interpret)(jnp.tanh(x))


def test_a_helpers_parameter_passed_interpret_is_read_as_interpret():
    for impl in (compiled_by_helper, compiled_by_partial):
        found = impl_source.findings(impl)
        assert {f.kind for f in found} == {source_rules.BACKEND}, (impl.__name__, found)
        assert any("_rounded" in f.text or "exact" in f.what for f in found), found
