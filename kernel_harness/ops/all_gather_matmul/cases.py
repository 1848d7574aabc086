"""Cases of the all-gather matmul op and the strategy.

``x [m, k]`` is sharded by rows over a 1-D mesh of ``devices`` devices, ``y`` ([k, n], or
[n, k] with ``rhs_transpose``) by columns of the product; each device gathers x and
computes its ``n / devices`` columns of ``x @ y``. The kernel's tiling (``bn`` columns and
``bk`` of the contraction per step) is the case's: 0 asks for the kernel's own default.
The mesh size and the DMA schedule are every collective case's (:mod:`kernel_harness.ops.mesh`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import check_sizes, standard_normal
from kernel_harness.ops.mesh import MeshCase, device_counts, dma_modes, mesh_events


@dataclasses.dataclass(frozen=True, kw_only=True)
class AgmmCase(MeshCase):
    """One all-gather matmul on ``devices`` devices (:class:`~kernel_harness.ops.mesh.
    MeshCase`).

    Attributes:
      m_per_device, k, n_per_device: x is [devices * m_per_device, k], the product
        [devices * m_per_device, devices * n_per_device].
      bn, bk: the kernel's blocks of n_per_device and k (0: the kernel's default).
      rhs_transpose: y given as [n, k].
    """

    m_per_device: int
    k: int
    n_per_device: int
    bn: int = 0
    bk: int = 0
    rhs_transpose: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        check_sizes(self, "m_per_device", "k", "n_per_device")
        if self.m_per_device % 16:
            raise ValueError(f"m_per_device must be a multiple of 16 (half a shard each way, "
                             f"in whole 8-row tiles), got {self.m_per_device}")
        for name, size, block in (("k", self.k, self.bk), ("n_per_device", self.n_per_device,
                                                           self.bn)):
            if size % 128 or (block and (block % 128 or size % block)):
                raise ValueError(f"{name} ({size}) and its block ({block}) must be multiples "
                                 f"of 128, the block dividing {name} (0: the kernel's default)")

    @property
    def m(self) -> int:
        return self.devices * self.m_per_device

    @property
    def n(self) -> int:
        return self.devices * self.n_per_device

    def shape_summary(self) -> str:
        """``devices=3 x=(96,256) y=(256,384) bn=128 bk=256 dma=on_wait``."""
        y = (self.n, self.k) if self.rhs_transpose else (self.k, self.n)
        blocks = " ".join(f"{b}={v or 'default'}" for b, v in (("bn", self.bn),
                                                                ("bk", self.bk)))
        return (f"devices={self.devices} x=({self.m},{self.k}) y=({y[0]},{y[1]})"
                f"{' transposed' if self.rhs_transpose else ''} {blocks} dma={self.dma_mode}")

    def materialize(self) -> dict[str, np.ndarray]:
        """x and y standard normal in the case's dtype."""
        rng = self.rng()
        y_shape = (self.n, self.k) if self.rhs_transpose else (self.k, self.n)
        return {"x": standard_normal(rng, (self.m, self.k), self.dtype),
                "y": standard_normal(rng, y_shape, self.dtype)}


def agmm_events(case: AgmmCase) -> list[str]:
    """The kernel's paths: the mesh size, several column or contraction blocks, y
    transposed, the schedule."""
    ev = [case.dtype, *mesh_events(case)]
    if case.bn and case.n_per_device // case.bn > 1:
        ev.append("multi-n-block")
    if case.bk and case.k // case.bk > 1:
        ev.append("multi-k-block")
    ev.append("rhs-transposed" if case.rhs_transpose else "rhs-plain")
    return ev


@st.composite
def agmm_cases(draw: st.DrawFn, *, max_devices: int | None = None,
               dtypes: tuple[str, ...] = ("float32", "bfloat16")) -> AgmmCase:
    """Valid :class:`AgmmCase` s with explicit blocks (the kernel's default is wrong for
    shapes its tuned table lacks: docs/libraries.md): 2..``max_devices`` devices (None:
    what this jax's interpreter runs), 16-32 rows per device, k and n_per_device of 128 or
    256 with blocks of 128 or the whole, y plain or transposed, either DMA schedule."""
    k = draw(st.sampled_from((128, 256)))
    n_per_device = draw(st.sampled_from((128, 256)))
    return AgmmCase(
        dtype=draw(st.sampled_from(dtypes)), seed=draw(st.integers(0, 2**31 - 1)),
        devices=draw(device_counts(max_devices)),
        m_per_device=draw(st.sampled_from((16, 32))), k=k, n_per_device=n_per_device,
        bn=draw(st.sampled_from(sorted({128, n_per_device}))),
        bk=draw(st.sampled_from(sorted({128, k}))),
        rhs_transpose=draw(st.booleans()), dma_mode=draw(dma_modes()))
