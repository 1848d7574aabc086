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
from collections.abc import Mapping

import numpy as np


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


def tpu_interpreting_source(cores: int = 1) -> str:
    """Script source defining ``interpreting()``, for a TPU kernel without an ``interpret``
    argument: under ``INTERPRET``, forced TPU interpret mode with the harness's plain
    settings (no race detection, zeroed scratch, ``cores`` simulated cores; the core-count
    field's name of either jax version), else a null context."""
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
    return pltpu.force_tpu_interpret_mode(pltpu.InterpretParams(
        detect_races=False, uninitialized_memory="zero", **{{cores: {cores}}}))
'''


#: Module-level lines of a collective family's script that ask for 8 simulated CPU devices
#: before jax starts its backends (unless XLA_FLAGS names a count already).
DEVICES_FIRST = """\
if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_force_host_platform_device_count=8").strip()
"""
