"""The collective ops' shared case (kernel_harness/ops/mesh.py): the mesh (1-D or 2-D) and
the DMA schedule, their checks, events and strategies."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_harness.core.compat.mesh import tpu_interpreter_max_devices
from kernel_harness.ops.mesh import (
    DMA_MODES,
    MAX_DEVICES,
    MeshCase,
    device_counts,
    dma_modes,
    drawn_max_devices,
    mesh_events,
    other_axes,
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


@dataclasses.dataclass(frozen=True, kw_only=True)
class Grid(MeshCase):
    TWO_D = True


def test_a_second_axis_gives_a_2d_mesh_in_either_order_and_its_events():
    first = Grid(dtype="float32", seed=0, devices=3, other_axis=2)
    last = dataclasses.replace(first, other_axis_first=False)
    assert first.mesh_layout() == ((2, 3), ("y", "x")) and first.total_devices == 6
    assert last.mesh_layout() == ((3, 2), ("x", "y"))
    assert Ring(dtype="float32", seed=0, devices=3).mesh_layout() == ((3,), ("x",))
    assert mesh_events(last)[-2:] == ["mesh:2d", "mesh:other-axis-last"]


def test_a_1d_op_refuses_a_second_axis_and_no_mesh_exceeds_the_simulated_devices():
    with pytest.raises(ValueError, match="Ring runs on a 1-D mesh only"):
        Ring(dtype="float32", seed=0, devices=2, other_axis=2)
    with pytest.raises(ValueError, match="devices x other_axis = 9 is more than the 8"):
        Grid(dtype="float32", seed=0, devices=3, other_axis=3)


@settings(max_examples=30, database=None, derandomize=True)
@given(data=st.data(), n=device_counts(4))
def test_a_drawn_second_axis_fits_the_limit(data, n):
    fields = data.draw(other_axes(n, 4))
    case = Grid(dtype="float32", seed=0, devices=n, **fields)
    assert case.total_devices <= 4 and (fields == {} or case.other_axis >= 2)
