"""Call-shaped rules of the source check (:mod:`kernel_harness.run.source_rules` asks them
for each node): an attribute of an introspection module read by name (``getattr(sys, ...)``,
``vars(sys)``), a file read or written. (Not a device's ``platform`` or ``device_kind``:
jax's own TPU kernels read the generation to pick their tiles.)"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from kernel_harness.run import source_names as known


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
    return None


def kinds(node: ast.AST, dotted: Callable[[ast.AST], str | None],
          local: set[str]) -> Iterator[tuple[str, str]]:
    """(kind, what) for a call or attribute node; ``dotted`` resolves a node to its dotted
    name (the module's aliases resolved), ``local``: the names the function binds."""
    if not isinstance(node, ast.Call):
        return
    func = node.func
    name = "" if isinstance(func, ast.Name) and func.id in local else dotted(func) or ""
    if name in ("getattr", "vars", "builtins.getattr", "builtins.vars") and node.args:
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
