"""The implementation's own source, read for code that makes a kernel behave differently
when it is checked (issue 55, principle 2: "an impl that behaves differently when observed").

Everything else the harness measures is the program that runs: traced, counted, poisoned
and judged by value. None of it can see a branch that the harness's runs never take: an
implementation that asks whether the harness, Hypothesis or pytest is loaded or on the
stack, that reads the clock (a time bomb), that counts its own calls (a bomb after N calls),
that tells a traced call from an eager one, that reads the matmul-precision context the
harness traces under, or that branches on ``interpret`` (one program on the CPU
interpreters, another compiled on the accelerator), is honest in every check run and wrong
in the user's. KernelBench's answer to the same problem is a static check of the submitted
source; this is ours. It reads the code the implementation can reach (the callable, what
it closes over, the functions and modules its code names, custom VJP rules, partials, the
methods of its own classes it names or of objects it names, and its modules' import-time
statements that bind a name its functions read),
never the code of jax, numpy, the standard library, the harness itself, Hypothesis or
pytest, and names each line that:

- **observes the harness**: ``sys.modules``, stack frames (``sys._getframe``, ``inspect``'s
  stack functions, ``traceback``'s stack functions), a string naming the harness,
  Hypothesis or pytest, ``__import__``;
- **reads the clock**: ``time.time``, ``strftime`` and their kin, ``datetime``'s
  ``now``/``today``;
- **keeps state across calls**: ``global``/``nonlocal`` names it rebinds, an assignment
  into a module-level object from itself (``n += 1``, ``c[0] = c[0] + 1``; an object of its
  own class included) or a method changing one in place (``append``), ``next()`` of a
  module-level iterator or its bound ``__next__``, a file or directory read or written, a
  cache's ``cache_info()``, ``jax.config.update``; and, by any spelling, jax's
  process-wide configuration changed by the example's calls (:func:`config_changes`);
- **tells traced from eager**: a reference to jax's ``Tracer`` class or its tracing
  machinery, an attribute only a concrete array has, a string naming a tracer, a ``try``
  that catches a tracer's error or wraps a conversion to the host in a broad handler;
- **reads the process or host**: the process id, the environment, the host, randomness,
  and any standard-library module outside those computation needs (an allowlist), an
  object's ``id()`` or a salted ``hash()``;
- **runs code it does not show**: ``eval``, ``exec``, ``compile``;
- **reads jax's precision context**: ``default_matmul_precision``'s value;
- **branches on the backend**: an ``if``, conditional expression, loop or index that
  reads ``interpret`` (or a name computed from it, or a helper's parameter a caller passed
  it to: :mod:`kernel_harness.run.source_flow`), a value computed from ``interpret``
  into a name that does not say interpret, ``jax.default_backend()`` or a device's
  ``platform`` read anywhere.

Each finding fails every example of the check, as the failure class ``suspicious source``
with the kind, the file, the line and the line's text (:func:`findings`). The reach is
static and shallow: a name built at run time, a module imported through a string, code
reached only through an object's attribute of an attribute is not read (docs/kernel-ran.md
says so); what it reads, it reads whole.
"""

from __future__ import annotations

import functools
import pathlib
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

from kernel_harness.core.compat import global_config
from kernel_harness.core.errors import UsageError
from kernel_harness.records.config import load_config
from kernel_harness.run import source_flow
from kernel_harness.run.source_calls import trusted
from kernel_harness.run.source_rules import KINDS, STATE, Finding, lint, lint_module

#: The failure class, as reports and events name it.
SUSPICIOUS = "suspicious source"

#: Harness code that is followed but not read: a family's adapter module binds the kernel
#: it wraps (a library's function) and passes the call on.
FOLLOWED = ("kernel_harness.families.",)


def _followed_only(module: str | None) -> bool:
    return (module or "").startswith(FOLLOWED)


def _callables_in(obj: Any) -> Iterator[Any]:
    """What a callable wraps: a partial's function and arguments, a jitted function's
    Python function, a custom VJP's/JVP's rules, a bound method's function, a callable
    instance's ``__call__``."""
    if isinstance(obj, functools.partial):
        yield obj.func
        yield from obj.args
        yield from obj.keywords.values()
        return
    for attr in ("__wrapped__", "fun", "fwd", "bwd", "jvp", "__func__"):
        inner = getattr(obj, attr, None)
        if inner is not None and callable(inner):
            yield inner
    if not isinstance(obj, (types.FunctionType, type)) and callable(obj):
        call = type(obj).__dict__.get("__call__")
        if isinstance(call, types.FunctionType):
            yield call


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _reached(fn: types.FunctionType) -> Iterator[Any]:
    """The objects a function's code can name: its globals (and attributes of the modules
    among them its code names, except from a harness adapter: a built-in family's library
    module is not read), its closure, its defaults."""
    names = {n for code in _codes(fn.__code__) for n in code.co_names}
    adapter = _followed_only(fn.__module__)
    for name in names:
        if name not in fn.__globals__:
            continue
        obj = fn.__globals__[name]
        if isinstance(obj, types.ModuleType):
            if not trusted(obj.__name__) and not adapter:
                yield from (getattr(obj, n) for n in names if hasattr(obj, n))
        else:
            yield obj
    for cell in fn.__closure__ or ():
        try:
            yield cell.cell_contents
        except ValueError:  # an empty cell
            continue
    yield from fn.__defaults__ or ()
    yield from (fn.__kwdefaults__ or {}).values()


def _methods(cls: type) -> Iterator[Any]:
    """The functions a class defines: methods, static and class methods, properties."""
    for value in vars(cls).values():
        if isinstance(value, (staticmethod, classmethod)):
            yield value.__func__
        elif isinstance(value, property):
            yield from (f for f in (value.fget, value.fset) if f is not None)
        elif isinstance(value, types.FunctionType):
            yield value


def functions(impl: Callable[..., Any]) -> list[types.FunctionType]:
    """The implementation's own Python functions: those reachable from ``impl`` outside
    :data:`TRUSTED` packages (harness adapters under :data:`FOLLOWED` are passed through)."""
    out: list[types.FunctionType] = []
    seen: set[int] = set()
    stack: list[Any] = [impl]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or not callable(obj):
            continue
        seen.add(id(obj))
        if isinstance(obj, type):
            # A class of the implementation's own (a counter's class, a config with
            # methods): its methods are its code; jax's, numpy's, the harness's are not.
            if not trusted(obj.__module__) and not _followed_only(obj.__module__):
                stack.extend(_methods(obj))
            continue
        if isinstance(obj, types.FunctionType):
            module = obj.__module__
            if trusted(module) and not _followed_only(module):
                continue
            if not _followed_only(module):
                out.append(obj)
            # an instance the code names (a module-level counter object) brings its class
            stack.extend(o if callable(o) else type(o) for o in _reached(obj)
                         if callable(o) or not trusted(type(o).__module__))
            continue
        stack.extend(_callables_in(obj))
    return out


_FOUND: dict[int, tuple[Any, tuple[Finding, ...]]] = {}


def findings(impl: Callable[..., Any]) -> tuple[Finding, ...]:
    """Every suspicious line of the code ``impl`` can reach (:func:`functions`), each
    once, in file and line order; remembered per implementation."""
    hit = _FOUND.get(id(impl))
    if hit is not None and hit[0] is impl:
        return hit[1]
    fns = functions(impl)
    # What each module's import-time code bound for the functions read (a flag set once).
    names: dict[str, set[str]] = {}
    for fn in fns:
        names.setdefault(fn.__module__, set()).update(
            n for code in _codes(fn.__code__) for n in code.co_names)
    carriers = source_flow.interpret_carriers(fns)
    found = [f for fn in fns for f in lint(fn, carriers.get(fn.__code__, frozenset()))]
    found += [f for module, used in names.items() if module in sys.modules
              for f in lint_module(sys.modules[module], used)]
    unique = {(f.file, f.line, f.kind): f for f in found}
    out = tuple(sorted(unique.values(), key=lambda f: (f.file, f.line, f.kind)))
    _FOUND[id(impl)] = (impl, out)
    return out


def config_snapshot() -> dict[str, Any]:
    """jax's process-wide options now (what :func:`config_changes` compares with)."""
    return global_config.snapshot()


def config_changes(before: dict[str, Any]) -> tuple[Finding, ...]:
    """A finding for each jax option whose process-wide value changed since ``before`` (the
    implementation's call set it, by whatever name: a program of the user's run after it
    would change too); each is put back, so later checks run as before."""
    changes = global_config.changed_since(before)
    global_config.restore(changes)
    return tuple(Finding(STATE, "jax.config", 0, f"{option}: {old!r} -> {new!r}",
                         "the call changed jax's configuration for the whole process; "
                         "put back") for option, old, new in changes)


def problem_text(found: tuple[Finding, ...]) -> str:
    """The failure's detail: what each line can do, and why that fails the check."""
    kinds = sorted({f.kind for f in found})
    return (f"the implementation's source has code that can behave differently when it is "
            f"checked than in a user's program ({', '.join(kinds)}); every check run would "
            f"take one side of it: " + "; ".join(str(f) for f in found[:6])
            + (f"; and {len(found) - 6} more" if len(found) > 6 else ""))


_ACCEPTED: dict[str, tuple[tuple[dict[str, str], ...], str]] = {"user": ((), "")}


def check_accepted(entries: tuple[dict[str, str], ...], source: Any) -> None:
    """Raises :class:`~kernel_harness.core.errors.UsageError` for an ``accepted-source``
    entry whose kind is not one of :data:`KINDS`."""
    for i, entry in enumerate(entries, 1):
        if entry["kind"] not in KINDS:
            raise UsageError(f"{source}: [[tool.kernel-harness.accepted-source]] entry {i}: "
                             f"kind {entry['kind']!r} is not one of: {', '.join(KINDS)}")


def use_accepted(entries: tuple[dict[str, str], ...], source: str | None) -> None:
    """Puts the user's accepted lines (``[[tool.kernel-harness.accepted-source]]`` of
    ``source``) in force for every check from now on in this process."""
    check_accepted(entries, source)
    _ACCEPTED["user"] = (tuple(entries), source or "pyproject.toml")


def _acceptance(f: Finding) -> dict[str, str] | None:
    entries, _ = _ACCEPTED["user"]
    # A mutant's copy (kernel-harness mutate) is compiled as "<file> [mutant NAME]".
    file = str(pathlib.Path(f.file.split(" [mutant ")[0]).resolve())
    for entry in entries:
        if entry["kind"] == f.kind and entry["file"] == file and entry["text"] in f.text:
            return entry
    return None


def unaccepted(found: tuple[Finding, ...]) -> tuple[Finding, ...]:
    """The findings no accepted entry in force covers (a failure of the check)."""
    return tuple(f for f in found if _acceptance(f) is None)


def accepted_notes(found: tuple[Finding, ...]) -> list[str]:
    """``suspicious source accepted by pyproject.toml: <finding> (<reason>)`` for each
    finding the user's config accepts (reported, never silent)."""
    source = pathlib.Path(_ACCEPTED["user"][1]).name
    return [f"{SUSPICIOUS} accepted by {source}: {f} ({entry['reason']})"
            for f in found if (entry := _acceptance(f)) is not None]


def accepted_in_force() -> tuple[tuple[dict[str, str], ...], str]:
    """The accepted entries in force and their file (to restore them later)."""
    return _ACCEPTED["user"]


def use_project_accepted() -> None:
    """Puts the accepted lines of the project's ``pyproject.toml`` (found from the working
    directory, :func:`kernel_harness.records.config.load_config`) in force, as a check
    session does (``kernel-harness mutate``'s runs: a mutant's copy matches its file)."""
    config = load_config()
    use_accepted(config.accepted_source, None if config.source is None else str(config.source))
