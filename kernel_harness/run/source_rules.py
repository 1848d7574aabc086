"""The rules :mod:`kernel_harness.run.impl_source` reads one function's source with: which
lines can tell a check from a user's run (the kinds, the names each kind looks for), as
:class:`Finding` s. Why each rule and what it leaves alone: that module's docstring.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import types
from collections.abc import Iterator
from typing import Any

from kernel_harness.run import source_calls
from kernel_harness.run import source_names as known
from kernel_harness.run.source_names import BACKEND_KIND as BACKEND
from kernel_harness.run.source_names import CLOCK_KIND as CLOCK
from kernel_harness.run.source_names import OBSERVES, STATE, TRACED
from kernel_harness.run.source_names import PRECISION_KIND as PRECISION


@dataclasses.dataclass(frozen=True)
class Finding:
    """One line of the implementation's source that can tell a check from a user's run."""

    kind: str
    file: str
    line: int
    text: str
    what: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.file}:{self.line}: {self.text} ({self.what})"


def _canonical_heads(namespace: dict[str, Any], tree: ast.AST) -> dict[str, str]:
    """Each name code of ``namespace`` (a function's globals, a module's) can use as the
    head of a dotted name, as the dotted path of what it is: a module's name, a function's or
    class's ``module.qualname``, local imports included (``from jax._src import config as
    _cfg`` inside a body)."""
    heads: dict[str, str] = {"__import__": "builtins.__import__"}
    for name, obj in namespace.items():
        if isinstance(obj, types.ModuleType):
            heads[name] = obj.__name__
        elif isinstance(obj, (types.FunctionType, type, types.BuiltinFunctionType)):
            module = getattr(obj, "__module__", None) or ""
            heads[name] = f"{module}.{getattr(obj, '__qualname__', name)}".lstrip(".")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                heads[a.asname or top] = a.name if a.asname else top
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                heads[a.asname or a.name] = f"{node.module}.{a.name}"
    return heads


def _dotted(node: ast.AST, heads: dict[str, str]) -> str | None:
    root, parts = source_calls.chain(node)
    return None if root is None else ".".join([heads.get(root, root), *parts])


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)):
            out.add(id(body[0].value))
    return out


_CONSTRUCTORS = ("__init__", "__post_init__", "__new__", "__set_name__")


def _outer(root: str | None, local: set[str], outer: dict[str, Any], fn: str,
           target: ast.AST | None = None) -> bool:
    """Whether an object the code updates outlives the call: a host object of the module
    or of the enclosing function's closure (not a kernel's ref: those are jax's types), one
    reached from it by attributes (``Counter.calls[0]``, a class of the implementation's
    own), or the instance's own (``self``/``cls`` outside a constructor)."""
    if root is None:
        return False
    if root in ("self", "cls"):
        return fn not in _CONSTRUCTORS
    if root in local or root not in outer:
        return False
    attrs = []
    while target is not None and not isinstance(target, ast.Name):
        if isinstance(target, ast.Attribute):
            attrs.append(target.attr)
        target = getattr(target, "value", None)
    obj = outer[root]
    for attr in [None, *reversed(attrs)]:
        obj = obj if attr is None else getattr(obj, attr, None)
        if source_calls.host_mutable(obj) or (isinstance(obj, type)
                                              and not source_calls.trusted(obj.__module__)):
            return True
    return False


def _kinds(node: ast.AST, heads: dict[str, str], local: set[str], docs: set[int],
           outer: dict[str, Any], fn: str, rebound: set[str], exempt: set[int],
           scope: ast.AST | None, top: ast.AST | None,
           tainted: set[str] = frozenset(), carriers: frozenset[str] = frozenset()
           ) -> Iterator[tuple[str, str]]:
    """(kind, what) for one node of a function's tree (``local``: the names its innermost
    function binds)."""
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None \
            and id(node.value) not in exempt:
        stored = _stored(node)
        if stored and not all("interpret" in n for n in stored) and _from_interpret(
                node.value, names=_INTERPRET | carriers):
            yield BACKEND, "a value computed from `interpret`"
    yield from source_calls.kinds(node, lambda n: _dotted(n, heads), local, outer, fn)
    if isinstance(node, (ast.Attribute, ast.Name)):
        dotted = _dotted(node, heads) or ""
        hit = source_calls.classify(dotted)
        root = _root(node)
        if hit is None and root in heads and root not in local:
            hit = source_calls.host_module(dotted)
        if hit is not None:
            yield hit
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
        hit = [n for n in known.NAMES if n in node.value]
        if hit:
            yield OBSERVES, f"the string {node.value[:40]!r} names {hit[0]}"
        traced = [n for n in known.TRACER_STRINGS if n in node.value]
        if traced:
            yield TRACED, f"the string {node.value[:40]!r} names {traced[0]}"
    elif isinstance(node, ast.Try):
        yield from source_calls.traced_try(node, lambda n: _dotted(n, heads), local)
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        # A global the call counts with, or a name of the function's enclosing scope (that
        # call has returned: each call of this one sees what the last left). A global set
        # to a constant (a warn-once flag) and a nonlocal of a nested helper are not.
        names = [n for n in node.names if n in rebound or isinstance(node, ast.Nonlocal)]
        if names and (isinstance(node, ast.Global) or scope is top):
            yield STATE, f"{type(node).__name__.lower()} {', '.join(names)}"
    elif isinstance(node, ast.AugAssign) and not isinstance(node.target, ast.Name):
        root = _root(node.target)
        if _outer(root, local, outer, fn):
            yield STATE, f"updates {root}, which outlives the call"
    elif isinstance(node, ast.Assign) and any(
            not isinstance(t, ast.Name) for t in node.targets):
        # COUNT[0] = COUNT[0] + 1, self.n = self.n + 1: a counter without "+="
        read = {_root(n) for n in ast.walk(node.value) if isinstance(n, (ast.Attribute,
                                                                        ast.Subscript))}
        for target in node.targets:
            root = _root(target)
            if not isinstance(target, ast.Name) and root in read \
                    and _outer(root, local, outer, fn, target):
                yield STATE, f"updates {root}, which outlives the call"
                break
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id == "next" and node.args:
        root = _root(node.args[0])
        if _outer(root, local, outer, fn):
            yield STATE, f"advances {root}, which outlives the call"
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in known.MUTATORS:
        root = _root(node.func.value)
        if _outer(root, local, outer, fn, node.func.value):
            yield STATE, f"changes {root} ({node.func.attr}), which outlives the call"
    elif isinstance(node, (ast.If, ast.IfExp, ast.While)) and id(node) not in exempt:
        yield from _backend_test(node.test, tainted, "a branch")
    elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        yield from _backend_test(node.slice, tainted, "an index", _outside_calls)


def _outside_calls(node: ast.AST) -> Iterator[ast.AST]:
    """``node`` and what it contains, but not a call's arguments (a value passed on to a
    call, ``f(interpret=interpret)``, chooses nothing here)."""
    yield node
    if isinstance(node, ast.Call):
        yield from _outside_calls(node.func)
        return
    for child in ast.iter_child_nodes(node):
        yield from _outside_calls(child)


_PACKING = (ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Starred)
_INTERPRET = frozenset({"interpret"})


def _from_interpret(value: ast.AST, element: bool = False,
                    names: frozenset[str] = _INTERPRET) -> bool:
    """Whether ``value`` reads ``interpret`` outside calls, other than as an element packed
    unchanged into a tuple, list, set or dict (``args = (scale, interpret)`` passes it on;
    the packed name stays tainted, so a test on ``args[1]`` is read as one on it)."""
    if isinstance(value, ast.Name):
        return value.id in names and not element
    if isinstance(value, ast.Call):
        return _from_interpret(value.func, names=names)
    return any(_from_interpret(c, isinstance(value, _PACKING), names)
               for c in ast.iter_child_nodes(value))


def _backend_test(test: ast.AST, tainted: set[str], what: str,
                  walk: Any = ast.walk) -> Iterator[tuple[str, str]]:
    """BACKEND where ``test`` reads ``interpret`` (or a name computed from it). (A read of
    ``jax.default_backend()`` is named wherever it stands:
    :func:`kernel_harness.run.source_calls.kinds`.)"""
    for sub in walk(test):
        if isinstance(sub, ast.Name) and (sub.id == "interpret" or sub.id in tainted):
            via = "" if sub.id == "interpret" else f" (through {sub.id})"
            yield BACKEND, f"{what} on `interpret`{via}"
            return


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _own_locals(scope: ast.AST) -> set[str]:
    """The names a function binds itself (its parameters, its assignments), not those of
    the functions nested in it."""
    out: set[str] = set()
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        if isinstance(node, _SCOPES):
            if not isinstance(node, ast.Lambda):
                out.add(node.name)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return out


def _scoped(tree: ast.AST) -> Iterator[tuple[ast.AST, set[str], ast.AST | None]]:
    """Every node with the names bound by its innermost enclosing function, and that
    function's node."""
    stack: list[tuple[ast.AST, set[str], ast.AST | None]] = [(tree, set(), None)]
    while stack:
        node, local, scope = stack.pop()
        yield node, local, scope
        if isinstance(node, _SCOPES):
            local, scope = _own_locals(node), node
        stack.extend((child, local, scope) for child in ast.iter_child_nodes(node))


def _interpret_values(tree: ast.AST) -> set[int]:
    """The conditional expressions that only choose the interpret setting itself
    (``interpret=InterpretParams() if interpret else False``): how a kernel passes the
    setting on, not a second program."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and "interpret" in (node.arg or ""):
            value = node.value
        elif (isinstance(node, ast.Assign) and len(node.targets) == 1
              and isinstance(node.targets[0], ast.Name) and "interpret" in node.targets[0].id):
            value = node.value
        else:
            continue
        if isinstance(value, ast.IfExp):
            out.add(id(value))
    return out


def _interpret_tainted(tree: ast.AST, carriers: frozenset[str] = frozenset()) -> set[str]:
    """Names computed from ``interpret`` (``compiled = interpret is False``), transitively,
    and ``carriers`` (parameters a caller passed ``interpret`` to under another name); a
    name that itself says interpret passes the setting on and is left out."""
    out: set[str] = set(carriers)
    assigns = [n for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign,
                                                           ast.NamedExpr))]
    while True:
        grown = set(out)
        for node in assigns:
            value = node.value
            if value is None or not any(
                    isinstance(n, ast.Name) and (n.id == "interpret" or n.id in grown)
                    for n in _outside_calls(value)):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name) and "interpret" not in n.id:
                        grown.add(n.id)
        if grown == out:
            return out
        out = grown


def _rebound(tree: ast.AST) -> set[str]:
    """Names the code counts with (``n += 1``, ``n = n + 1``)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
        elif isinstance(node, ast.Assign):
            used = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
            out |= {t.id for t in node.targets if isinstance(t, ast.Name) and t.id in used}
    return out


def lint(fn: types.FunctionType, carriers: frozenset[str] = frozenset()) -> list[Finding]:
    """The suspicious lines of one function (its nested functions included); ``[]`` where
    its source cannot be read. ``carriers``: its parameters that hold the interpret setting
    under another name (:func:`kernel_harness.run.source_flow.interpret_carriers`)."""
    parsed = source_calls.parsed(fn)
    if parsed is None:
        return []
    tree, start, lines = parsed
    heads, docs = _canonical_heads(fn.__globals__, tree), _docstrings(tree)
    outer = source_calls.scope(fn)
    top = next((n for n in ast.iter_child_nodes(tree) if isinstance(n, _SCOPES)), None)
    rebound, exempt = _rebound(tree), _interpret_values(tree)
    tainted = _interpret_tainted(tree, carriers)
    seeded = source_calls.seeds_numpy(tree, lambda n: _dotted(n, heads))
    out = []
    for node, local, scope in _scoped(tree):
        for kind, what in _kinds(node, heads, local, docs, outer, fn.__name__, rebound,
                                 exempt, scope, top, tainted, carriers):
            if seeded and what.startswith(known.NUMPY_RANDOM):
                continue
            lineno = getattr(node, "lineno", 1)
            text = lines[lineno - 1].strip() if lineno <= len(lines) else ""
            out.append(Finding(kind, inspect.getsourcefile(fn) or "?", start + lineno - 1,
                               text, what))
    return _specific(out)


def _specific(found: list[Finding]) -> list[Finding]:
    """``found`` without the allowlist's findings (a module outside the computation) on
    lines a rule of its own names (``os.makedirs``: a directory marker, not only ``os``)."""
    named = {(f.file, f.line) for f in found if not f.what.startswith(known.HOST_MODULE)}
    return [f for f in found
            if not (f.what.startswith(known.HOST_MODULE) and (f.file, f.line) in named)]


def _stored(stmt: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store)}


def lint_module(module: types.ModuleType, names: set[str]) -> list[Finding]:
    """The suspicious lines of ``module``'s import-time code that binds one of ``names``
    (``_HARNESS = "kernel_harness" in sys.modules``, a date read once): what the
    implementation's functions read was decided when the module ran. Never a "keeps state"
    finding (import-time code runs once)."""
    try:
        source, file = inspect.getsource(module), inspect.getsourcefile(module) or "?"
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return []
    lines, docs = source.splitlines(), _docstrings(tree)
    heads, out = _canonical_heads(vars(module), tree), []
    for stmt in tree.body:
        if isinstance(stmt, (*_SCOPES, ast.ClassDef, ast.Import, ast.ImportFrom)) \
                or not _stored(stmt) & names:
            continue
        for node in ast.walk(stmt):
            for kind, what in _kinds(node, heads, set(), docs, {}, "<module>", set(),
                                     set(), None, None):
                if kind != STATE:
                    out.append(Finding(kind, file, node.lineno,
                                       lines[node.lineno - 1].strip(), what))
    return _specific(out)


#: Every kind a finding can have (what an ``accepted-source`` entry may name).
KINDS = (OBSERVES, CLOCK, STATE, TRACED, PRECISION, BACKEND, known.PROCESS_KIND,
         known.CONFIG_KIND, known.ALIASING_KIND, known.HIDDEN_KIND)
