"""Mutants as plain data: a planted bug is one source edit in one module.

A family's catalog (``kernel_harness/families/<name>/mutants.py``, ``MUTANTS``) is
a list of :class:`Mutant`; :mod:`kernel_harness.regression.mutate` runs them in child
processes (an import hook serves :func:`patched_source` in place of the module), and
tests load the same edit in-process with :func:`load_patched`. :func:`apply` is the one
patcher both use.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import linecache
import sys
import types
from collections.abc import Callable
from pathlib import Path

#: The tags of a mutant in the fast subset CI runs.
CI: tuple[str, ...] = ("ci",)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Mutant:
    """One planted bug: replace ``old`` by ``new`` in module ``module``'s source.

    Attributes:
      name: short name (``fwd-no-rescale``).
      description: the bug in words, as a kernel author would make it.
      module: dotted module whose source is mutated.
      old: source text to replace (exact, whitespace included).
      new: its replacement.
      occurrence: which occurrence of ``old`` (1-based) when it appears more than
        once; ``None`` requires exactly one.
      tags: ``ci`` marks the fast subset CI runs.
    """

    name: str
    description: str
    module: str
    old: str
    new: str
    occurrence: int | None = None
    tags: tuple[str, ...] = ()


def edits_of(module: str) -> Callable[..., Mutant]:
    """The constructor of ``module``'s mutants, ``m(name, description, old, new, *,
    occurrence=None, tags=())``: a catalog names each module once and each planted bug
    in one call."""

    def mutant(name: str, description: str, old: str, new: str, *,
               occurrence: int | None = None, tags: tuple[str, ...] = ()) -> Mutant:
        return Mutant(name=name, description=description, module=module, old=old, new=new,
                      occurrence=occurrence, tags=tags)

    return mutant


class StaleMutant(ValueError):
    """The mutant's source text is not where the catalog says (or is ambiguous)."""


def apply(mutant: Mutant, source: str) -> str:
    """The mutated source; :class:`StaleMutant` when ``old`` is missing or ambiguous."""
    if mutant.old == mutant.new:
        raise StaleMutant(f"{mutant.name}: old and new text are identical")
    count = source.count(mutant.old)
    if count == 0:
        raise StaleMutant(f"{mutant.name}: text not found in {mutant.module}: {mutant.old!r}")
    if mutant.occurrence is None:
        if count != 1:
            raise StaleMutant(
                f"{mutant.name}: text occurs {count} times in {mutant.module}; "
                f"set occurrence=1..{count}: {mutant.old!r}"
            )
        return source.replace(mutant.old, mutant.new)
    if not 1 <= mutant.occurrence <= count:
        raise StaleMutant(
            f"{mutant.name}: occurrence {mutant.occurrence} but the text occurs {count} times"
        )
    start = -1
    for _ in range(mutant.occurrence):
        start = source.index(mutant.old, start + 1)
    return source[:start] + mutant.new + source[start + len(mutant.old):]


def module_origin(module: str) -> Path:
    """The source file of ``module`` (its parents get imported, it may be too)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise StaleMutant(f"module {module!r} has no Python source file")
    return Path(spec.origin)


def patched_source(mutant: Mutant) -> tuple[Path, str]:
    """``(the module's source file, its source with the mutant applied)``;
    :class:`StaleMutant` when the edit does not apply."""
    origin = module_origin(mutant.module)
    return origin, apply(mutant, origin.read_text())


@functools.cache
def load_patched(mutant: Mutant) -> types.ModuleType:
    """A fresh module executed from the mutated source, for in-process use (tests take
    an implementation from it, e.g. ``load_patched(m).flash_attention``). It is registered
    as ``<module>__mutant_<name>``; the original module stays imported and untouched.
    Relative imports resolve against the original's package."""
    origin, source = patched_source(mutant)
    name = f"{mutant.module}__mutant_{mutant.name.replace('-', '_')}"
    filename = f"{origin} [mutant {mutant.name}]"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(name)
    module.__file__ = str(origin)
    module.__package__ = mutant.module.rpartition(".")[0]
    sys.modules[name] = module
    try:
        exec(compile(source, filename, "exec"), module.__dict__)  # noqa: S102
    except BaseException:
        del sys.modules[name]
        raise
    return module
