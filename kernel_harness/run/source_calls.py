"""Call- and attribute-shaped rules of the source check (:mod:`kernel_harness.run.source_rules`
asks them for each node): an attribute of an introspection module read by name
(``getattr(sys, ...)``, ``vars(sys)``), a file or directory read or written, a cache's
statistics, a bound method that advances or changes a host object, the platform the program
runs on, jax's configuration changed. (Not a device's ``device_kind``: jax's own TPU kernels
read the generation to pick their tiles.)"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from kernel_harness.run import source_names as known


def trusted(module: str | None) -> bool:
    """Whether ``module`` belongs to :data:`~kernel_harness.run.source_names.TRUSTED` or the
    standard library."""
    top = (module or "").split(".")[0]
    return top in known.TRUSTED or top in sys.stdlib_module_names


def host_mutable(value: Any) -> bool:
    """A Python object a call can change and the next call read: a list, dict, set, numpy
    array, iterator or a plain instance of a class outside the trusted packages (never a
    Pallas ref, a jax array, a module or a function)."""
    if isinstance(value, (list, dict, set, bytearray, np.ndarray, types.SimpleNamespace)):
        return True
    if hasattr(value, "__next__"):
        return True
    kind = type(value)
    return (not isinstance(value, (type, types.ModuleType, types.FunctionType))
            and hasattr(value, "__dict__") and not trusted(kind.__module__))


def parsed(fn: types.FunctionType) -> tuple[ast.AST, int, list[str]] | None:
    """``fn``'s source parsed: (tree, first line number, lines); None where it cannot be
    read or parsed."""
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return None
    return tree, max(start, 1), lines


def chain(node: ast.AST) -> tuple[str | None, list[str]]:
    """The root name and the attributes of a dotted expression, in order (``np.random.rand``:
    ``("np", ["random", "rand"])``); no root name for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return (node.id if isinstance(node, ast.Name) else None), parts[::-1]


def scope(fn: types.FunctionType) -> dict[str, Any]:
    """What ``fn``'s code can name: its module's globals and its closure's filled cells."""
    out = dict(fn.__globals__)
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
        try:
            out[name] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    return out


def _literal(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def classify(dotted: str) -> tuple[str, str] | None:
    """(kind, name) for a dotted name the source check looks for, else None: the one
    lookup of the name lists (a name read directly, or through ``getattr`` with a literal)."""
    if dotted in known.OBSERVE:
        return known.OBSERVES, dotted
    if dotted in known.CLOCK:
        return known.CLOCK_KIND, dotted
    if dotted in known.TRACER:
        return known.TRACED, dotted
    if dotted.endswith(known.PRECISION):
        return known.PRECISION_KIND, dotted
    if dotted.endswith(".ArrayImpl") or (
            dotted.startswith(known.TRACING_MODULES)
            and any(w in dotted.rsplit(".", 1)[-1].lower() for w in known.TRACING_WORDS)):
        return known.TRACED, dotted
    return None


def host_module(dotted: str) -> tuple[str, str] | None:
    """(kind, what) for a name of the standard library outside
    :data:`~kernel_harness.run.source_names.COMPUTATION_STDLIB` (``os.getpid``,
    ``threading.get_ident``, ``resource.getrusage``), or of ``numpy.random``; else None."""
    parts = dotted.split(".")
    if dotted.startswith("numpy.random."):
        return known.PROCESS_KIND, f"{known.NUMPY_RANDOM} ({dotted})"
    top = parts[0]
    if top not in sys.stdlib_module_names or top in known.COMPUTATION_STDLIB:
        return None
    allowed = known.COMPUTATION_PARTS.get(top)
    if allowed is not None and (len(parts) == 1 or parts[1] in allowed):
        return None
    return known.PROCESS_KIND, f"{known.HOST_MODULE} {dotted}: the standard library's {top} " \
                               "reaches the process or its host, which no kernel's " \
                               "arithmetic needs"


def _bound_state(obj: Any) -> bool:
    """A bound method that advances or changes a host object (``itertools.count().__next__``
    or ``cache.append`` kept in a module name and called later)."""
    owner = getattr(obj, "__self__", None)
    return (owner is not None and not isinstance(owner, types.ModuleType)
            and getattr(obj, "__name__", "") in (*known.MUTATORS, "__next__")
            and host_mutable(owner))


def _process(name: str) -> bool:
    return name in known.PROCESS or name.startswith("os.environ.") \
        or name.split(".")[0] in known.PROCESS_MODULES


def _attribute(node: ast.Attribute, dotted: Callable[[ast.AST], str | None]
               ) -> Iterator[tuple[str, str]]:
    name = dotted(node) or ""
    if _process(name):
        yield known.PROCESS_KIND, f"reads {name}: a check's process is not a user's"
    elif name.startswith(("jax.config.", "jax._src.config.")) \
            and not name.endswith(known.CONFIG_WRITES) and not name.endswith(known.PRECISION):
        # round 8: jax_enable_x64, a compile-cache setting the harness makes
        yield known.CONFIG_KIND, f"reads {name}: a check's settings are not a user's"
    elif node.attr in known.CONCRETE_ONLY:
        yield known.TRACED, f"reads .{node.attr}, which only a concrete array has"
    elif node.attr == "platform" and name.split(".")[0] not in sys.stdlib_module_names:
        # jax.devices()[0].platform: the CPU check takes one side, the accelerator the other
        yield known.BACKEND_KIND, "reads the platform it runs on (a device's platform)"
    elif node.attr in known.CACHE_STATS:
        yield known.STATE, f"reads a cache's statistics ({node.attr}): a count of the " \
                           "process's calls"


def _aliasing(node: ast.Compare, local: set[str]) -> Iterator[tuple[str, str]]:
    """``q is k`` between two of the function's names (not ``x is None``): the harness
    passes distinct arrays, a user's self-attention may pass one (round 8)."""
    left = node.left
    for op, right in zip(node.ops, node.comparators, strict=True):
        if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(left, ast.Name) \
                and isinstance(right, ast.Name) and {left.id, right.id} <= local:
            word = "is" if isinstance(op, ast.Is) else "is not"
            yield known.ALIASING_KIND, f"{left.id} {word} {right.id}: the check passes " \
                                       "distinct arrays"
        left = right


def kinds(node: ast.AST, dotted: Callable[[ast.AST], str | None], local: set[str],
          outer: dict[str, Any] | None = None, owner: str = "") -> Iterator[tuple[str, str]]:
    """(kind, what) for a call or attribute node; ``dotted`` resolves a node to its dotted
    name (the module's aliases resolved), ``local``: the names the function binds,
    ``outer``: the objects of its module and closure, ``owner``: the function's name (a
    ``__hash__`` method's own ``hash()`` is a key's, not the process's)."""
    if isinstance(node, ast.Attribute):
        yield from _attribute(node, dotted)
        return
    if isinstance(node, ast.Compare):
        yield from _aliasing(node, local)
        return
    if not isinstance(node, ast.Call):
        return
    func = node.func
    name = "" if isinstance(func, ast.Name) and func.id in local else dotted(func) or ""
    if name in known.HIDDEN:
        yield known.HIDDEN_KIND, f"{name}(): runs code built at run time, which no check " \
                                 "can read"
    elif name in known.PROCESS_BUILTINS and not (name == "hash" and owner == "__hash__"):
        yield known.PROCESS_KIND, f"{name}(): an address or a per-process salted hash; " \
                                  "a check's process is not a user's"
    if name in ("hasattr", "getattr", "builtins.hasattr", "builtins.getattr") \
            and len(node.args) > 1 and _literal(node.args[1]) in known.CONCRETE_ONLY:
        yield known.TRACED, f"asks for .{_literal(node.args[1])}, which only a concrete " \
                            "array has"
    if name in known.BACKEND:
        yield known.BACKEND_KIND, "reads the backend (jax.default_backend())"
    elif name.startswith("jax") and name.endswith(known.CONFIG_WRITES):
        # round 7: jax_default_matmul_precision set to bfloat16 for the user's whole program
        yield known.STATE, f"changes jax's configuration for the process ({name})"
    elif isinstance(func, ast.Name) and func.id not in local and outer is not None \
            and _bound_state(outer.get(func.id)):
        yield known.STATE, f"calls {func.id}, a bound method that changes a host object " \
                           "which outlives the call"
    elif name in ("getattr", "vars", "builtins.getattr", "builtins.vars") and node.args:
        target = dotted(node.args[0]) or ""
        if target.split(".")[0] in known.INTROSPECTION:
            attr = _literal(node.args[1]) if len(node.args) > 1 else None
            if attr is not None:
                yield classify(f"{target}.{attr}") or (known.OBSERVES,
                                                     f"reads {target}.{attr} by getattr")
            else:
                yield known.OBSERVES, f"reads {target}'s attributes by a computed name"
    elif name in known.FILES or (isinstance(func, ast.Attribute)
                                 and func.attr in known.FILE_METHODS):
        yield known.STATE, f"reads or writes a file ({name or func.attr}): state that " \
                           "outlives the process"


_BROAD = ("Exception", "BaseException", "TypeError")


def traced_try(node: ast.Try, dotted: Callable[[ast.AST], str | None], local: set[str]
               ) -> Iterator[tuple[str, str]]:
    """TRACED for a ``try`` that tells a traced call from an eager one: a handler catching
    one of jax's tracer errors, or a broad handler around a conversion to the host
    (``float(x)``, ``x.item()``, ``np.asarray(x)``), which succeeds eagerly and raises
    under a trace."""
    caught: list[str] = []
    for handler in node.handlers:
        types_ = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        caught += ["Exception" if t is None else (dotted(t) or "") for t in types_]
    named = [c for c in caught if c.rsplit(".", 1)[-1] in known.TRACER_ERRORS]
    if named:
        yield known.TRACED, f"catches {named[0]}, which a traced value raises where an " \
                            "eager one converts"
        return
    if not any(c.rsplit(".", 1)[-1] in _BROAD for c in caught):
        return
    for sub in (n for stmt in node.body for n in ast.walk(stmt)):
        if not isinstance(sub, ast.Call):
            continue
        func = sub.func
        if isinstance(func, ast.Attribute) and func.attr in known.HOST_CONVERSIONS:
            name = func.attr  # x.item(), x.tolist(), x.__float__()
        elif isinstance(func, ast.Name) and func.id in local or not sub.args:
            continue
        else:
            name = dotted(func) or ""  # float(x), np.asarray(x)
        if name in known.HOST_CONVERSIONS:
            yield known.TRACED, f"a try around {name}(), a conversion to the host: an " \
                                "eager call takes the body, a traced one the handler"
            return


def seeds_numpy(tree: ast.AST, dotted: Callable[[ast.AST], str | None]) -> bool:
    """Whether the function seeds numpy's global random state with a value
    (``np.random.seed(seed)``): its draws are then the same in every process."""
    return any(isinstance(n, ast.Call) and dotted(n.func) == "numpy.random.seed"
               and n.args and not (isinstance(n.args[0], ast.Constant)
                                   and n.args[0].value is None)
               for n in ast.walk(tree))
