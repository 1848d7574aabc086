"""The collective ops' shared case (kernel_harness/ops/mesh.py): the mesh size and the DMA
schedule, their checks, events and strategies."""

import dataclasses

import pytest
from hypothesis import given, settings

from kernel_harness.core.compat.mesh import tpu_interpreter_max_devices
from kernel_harness.ops.mesh import (
    DMA_MODES,
    MAX_DEVICES,
    MeshCase,
    device_counts,
    dma_modes,
    drawn_max_devices,
    mesh_events,
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Ring(MeshCase):
    rows: int = 8


def test_one_device_and_an_unknown_schedule_are_clear_errors():
    with pytest.raises(ValueError, match="devices must be 2 or more, got 1"):
        Ring(dtype="float32", seed=0, devices=1)
    with pytest.raises(ValueError, match=r"dma_mode must be one of \('on_wait', 'eager'\)"):
        Ring(dtype="float32", seed=0, devices=2, dma_mode="random")


def test_events_name_the_mesh_the_schedule_and_forwarding():
    assert mesh_events(Ring(dtype="float32", seed=0, devices=2)) == ["devices=2", "dma:on_wait"]
    assert mesh_events(Ring(dtype="float32", seed=0, devices=3, dma_mode="eager")) == [
        "devices=3", "dma:eager", "forwarded-slots"]


def test_the_drawn_device_count_respects_this_jaxs_interpreter():
    limit = tpu_interpreter_max_devices()
    assert drawn_max_devices() == (MAX_DEVICES if limit is None else min(MAX_DEVICES, limit))


@settings(max_examples=30, database=None, derandomize=True)
@given(n=device_counts(5), mode=dma_modes())
def test_strategies_draw_meshes_of_two_or_more_and_known_schedules(n, mode):
    assert 2 <= n <= 5 and mode in DMA_MODES
    Ring(dtype="float32", seed=0, devices=n, dma_mode=mode)  # every draw is a valid case
