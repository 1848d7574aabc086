"""The one place that knows which jax version spells a Pallas API which way.

Everything version-specific (TPU interpret parameters, ``shard_map``'s home,
lowering entry points) is looked up here so the rest of the harness can stay
version-agnostic across jax >= 0.10.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import jax

JAX_VERSION: tuple[int, ...] = tuple(int(p) for p in jax.__version__.split(".")[:3] if p.isdigit())


def tpu_interpret_params(**overrides: Any) -> Any:
    """Returns ``pltpu.InterpretParams`` with the harness's diagnostic defaults.

    NaN-filled uninitialized memory, race detection, a shuffled parallel grid
    order (where this jax has it) and two simulated cores. Keyword arguments
    this jax does not know are dropped, so the same call works across versions.
    """
    from jax.experimental.pallas import tpu as pltpu

    wanted: dict[str, Any] = {
        "uninitialized_memory": "nan",
        "detect_races": True,
        "random_seed": 0,
        "grid_point_recorder": None,
        "num_cores_or_threads": 2,
        # Only the shuffling of "parallel" grid dimensions is asked for.
        "dma_execution_mode": "on_wait",
    }
    wanted.update(overrides)
    known = {f.name for f in dataclasses.fields(pltpu.InterpretParams)}
    if "num_cores_or_threads" not in known and "num_cores_per_device" in known:
        wanted["num_cores_per_device"] = wanted.pop("num_cores_or_threads")
    return pltpu.InterpretParams(**{k: v for k, v in wanted.items() if k in known})


@contextlib.contextmanager
def forced_tpu_interpret_mode(params: Any) -> Iterator[None]:
    """Traces every ``pallas_call`` under this context in TPU interpret mode."""
    from jax.experimental.pallas import tpu as pltpu

    with pltpu.force_tpu_interpret_mode(params):
        yield


def reset_tpu_interpret_state() -> None:
    """Clears TPU interpret mode's global state; needed after any failure."""
    from jax.experimental.pallas import tpu as pltpu

    pltpu.reset_tpu_interpret_mode_state()


def tpu_interpret_races_found() -> bool:
    """Whether the last TPU-interpret run's race detector saw a race."""
    from jax._src.pallas.mosaic.interpret import interpret_pallas_call as ipc

    races = getattr(ipc, "races", None)
    return bool(races is not None and getattr(races, "races_found", False))


def shard_map() -> Any:
    """``jax.shard_map`` where it exists, else the experimental one."""
    if hasattr(jax, "shard_map"):
        return jax.shard_map
    from jax.experimental.shard_map import shard_map as experimental_shard_map

    return experimental_shard_map
