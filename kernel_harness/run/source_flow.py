"""Where the interpret setting flows between the implementation's own functions, for the
source check (:mod:`kernel_harness.run.impl_source`): a branch on ``interpret`` is a branch
on the backend, and so is one on a helper's parameter that a caller passed ``interpret``
to under another name (round 9 of the adversarial set chose its compiled path by a helper's
parameter called ``exact``, which a rule reading one function at a time cannot connect).

Followed: a call by name of a function the implementation can reach (a module-level
function, a closure's, ``module.helper``), positional and keyword arguments, and
``functools.partial(helper, ...)``; through as many helpers as pass it on. Not followed: a
method called on an object, a function chosen at run time.
"""

from __future__ import annotations

import ast
import functools
import types
from collections.abc import Iterable
from typing import Any

from kernel_harness.run import source_calls


def _resolve(node: ast.AST, scope: dict[str, Any]) -> object:
    """The object a call's function expression names in ``scope`` (a function's globals
    and closure: :func:`kernel_harness.run.source_calls.scope`)."""
    root, parts = source_calls.chain(node)
    obj = scope.get(root) if root is not None else None
    for attr in parts:
        obj = getattr(obj, attr, None)
    return obj


def _params(fn: types.FunctionType) -> list[str]:
    code = fn.__code__
    return list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])


def _bindings(call: ast.Call, scope: dict[str, Any]
              ) -> tuple[object, list[ast.AST], list[ast.keyword]]:
    """(callee, positional arguments, keywords) of ``call``, seeing through a
    ``functools.partial(helper, ...)``."""
    callee = _resolve(call.func, scope)
    args, keywords = list(call.args), list(call.keywords)
    if callee is functools.partial and args:
        callee = _resolve(args[0], scope)
        args = args[1:]
    return callee, args, keywords


def interpret_carriers(fns: Iterable[types.FunctionType]) -> dict[types.CodeType,
                                                                   frozenset[str]]:
    """For each of ``fns`` (the implementation's own functions), its parameters that hold
    the interpret setting under another name: a caller among ``fns`` passes ``interpret``
    (or a parameter that holds it) to them."""
    fns = list(fns)
    by_code = {fn.__code__: fn for fn in fns}
    # Each function's calls and the objects its code can name, read once for the fixed point.
    calls = {}
    for code, fn in by_code.items():
        source = source_calls.parsed(fn)
        if source is not None:
            calls[code] = ([n for n in ast.walk(source[0]) if isinstance(n, ast.Call)],
                           source_calls.scope(fn))
    carriers: dict[types.CodeType, set[str]] = {code: set() for code in by_code}
    changed = True
    while changed:
        changed = False
        for code, (nodes, scope) in calls.items():
            holding = {"interpret"} | carriers[code]
            for call in nodes:
                callee, args, keywords = _bindings(call, scope)
                target = getattr(callee, "__code__", None)
                if target not in by_code:
                    continue
                names = _params(by_code[target])
                passed = {names[i] for i, a in enumerate(args[:len(names)])
                          if isinstance(a, ast.Name) and a.id in holding}
                passed |= {k.arg for k in keywords if k.arg in names
                           and isinstance(k.value, ast.Name) and k.value.id in holding}
                passed -= {"interpret"} | carriers[target]
                if passed:
                    carriers[target] |= passed
                    changed = True
    return {code: frozenset(names) for code, names in carriers.items() if names}
