"""What a family contributes to a standalone repro script (``kernel-harness export-repro``).

The script must run without the harness installed, so a family hands over *source text*:
how to import its default kernel, how to call a kernel on the case's inputs with the
case's exact static options, and a short plain-jnp reference for that one case (dense
mask from the case description, softmax, vjp; float32 at HIGHEST precision). The
generic writer (:mod:`kernel_harness.regression.export`) adds the inputs (.npz), the
tolerances, the comparison and the exit status.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Mapping

import numpy as np

from kernel_harness.core import compat
from kernel_harness.core.compat import interpreter_ext


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExportSnippet:
    """Source text for one case of one family.

    Attributes:
      default_import: code binding the name ``kernel`` to the family's default
        implementation (used when no ``--impl`` is given).
      run_kernel: code defining ``run_kernel(x) -> dict`` of outputs; ``x`` maps the
        case's input names to numpy arrays; the name ``INTERPRET`` (bool) says whether
        to run the Pallas interpreter.
      reference: code defining ``reference(x) -> dict`` of float32 outputs, with the
        names ``jax``, ``jnp``, ``np`` and ``HI`` (``Precision.HIGHEST``) available.
      outputs: the outputs compared, in order (each must have a tolerance).
      platform: ``JAX_PLATFORMS`` to force for the interpret backend ("cpu"), or None.
      arrays: extra arrays for the .npz beside the case's inputs (e.g. a dense mask the
        reference reads when the family's mask language is too long to restate).
    """

    default_import: str
    run_kernel: str
    reference: str
    outputs: tuple[str, ...]
    platform: str | None = "cpu"
    arrays: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)


def module_source(module: object) -> str:
    """A module's source without its ``from __future__`` line (a script has its own)."""
    return "\n".join(line for line in inspect.getsource(module).splitlines()
                     if not line.startswith("from __future__"))


def tpu_interpreting_source(cores: int = 1, *, extended: bool = False) -> str:
    """Script source defining ``interpreting()``, for a TPU kernel without an ``interpret``
    argument: under ``INTERPRET``, forced TPU interpret mode with the harness's plain
    settings (no race detection, zeroed scratch, ``cores`` simulated cores; the core-count
    field's name of either jax version), else a null context. ``extended``: inside the
    harness's interpreter extensions too (the script must embed :func:`interpreter_source`
    before it)."""
    extension = "\n    stack.enter_context(tpu_interpreter_extensions())" if extended else ""
    return f'''\
import contextlib
import dataclasses

from jax.experimental.pallas import tpu as pltpu


def interpreting():
    """TPU interpret mode on the CPU ({cores} simulated core(s), zeroed scratch)."""
    if not INTERPRET:
        return contextlib.nullcontext()
    known = {{f.name for f in dataclasses.fields(pltpu.InterpretParams)}}
    cores = "num_cores_or_threads" if "num_cores_or_threads" in known else (
        "num_cores_per_device")
    stack = contextlib.ExitStack(){extension}
    stack.enter_context(pltpu.force_tpu_interpret_mode(pltpu.InterpretParams(
        detect_races=False, uninitialized_memory="zero", **{{cores: {cores}}})))
    return stack
'''


#: The one harness import of the interpreter extensions module (names from ``core.compat``).
_HARNESS_IMPORT = re.compile(
    r"^from kernel_harness\.core\.compat import (?:\(([^)]*)\)|([^\n(]+))\n", re.MULTILINE)
_LOCAL_ERROR = '''\
class InterpreterLayoutError(RuntimeError):
    """The installed jax's TPU interpreter is not laid out as the extensions expect."""
'''
_FUTURE = "from __future__ import annotations\n"


def _local(name: str) -> str:
    """The script's own definition of ``core.compat``'s ``name``: the exception class, or
    the function's source verbatim (with the marker it compares against)."""
    if name == "InterpreterLayoutError":
        return _LOCAL_ERROR
    obj = getattr(compat, name, None)
    if not inspect.isfunction(obj):
        raise ValueError(f"an export cannot embed core.compat.{name}: update "
                         "kernel_harness/records/export.py")
    source = inspect.getsource(obj)
    return ("_MISSING = object()\n\n\n" if "_MISSING" in source else "") + source


def interpreter_source() -> str:
    """The TPU interpreter extensions as embedded in a script (one source of truth, as the
    judge is): :mod:`kernel_harness.core.compat.interpreter_ext` verbatim, less its
    ``__future__`` import (it must open a file) and with what it imports from the harness
    (an exception, two patch helpers) defined in place of the import."""
    source = inspect.getsource(interpreter_ext)
    found = _HARNESS_IMPORT.search(source)
    if found is None or _FUTURE not in source:
        raise ValueError("kernel_harness/core/compat/interpreter_ext.py changed its imports: "
                         "update kernel_harness/records/export.py")
    listed = found.group(1) or found.group(2)
    names = [n.strip() for n in listed.replace("\n", ",").split(",") if n.strip()]
    local = "\n\n".join(_local(n) for n in names)
    source = (source[:found.start()] + local + source[found.end():]).replace(_FUTURE, "", 1)
    banner = ("# ---- kernel_harness/core/compat/interpreter_ext.py, embedded verbatim: the "
              "harness's TPU interpreter extensions ----")
    return f"{banner}\n{source.strip()}\n# ---- end ----"


#: Module-level lines of a collective family's script that ask for 8 simulated CPU devices
#: before jax starts its backends (unless XLA_FLAGS names a count already).
DEVICES_FIRST = """\
if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_force_host_platform_device_count=8").strip()
"""
