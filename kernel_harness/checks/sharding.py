"""Sharded execution: the kernels under ``shard_map`` on a simulated 4-device CPU mesh.

Each drawn case runs with its batch and head axes split over a mesh of up to
four CPU devices (``shard_map`` over the family's ``traceable`` program for
the per-shard case ``Metamorphic.local_case`` describes), and every output is
judged against the family's unsharded reference with the family tolerances.

The device count must be set before jax initializes its backends, so the
check always runs in a fresh subprocess (``python -m kernel_harness.checks.sharding``,
which ``kernel-harness shard`` and the tests start).
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kernel_harness.core import compat

DEVICES = 4
#: Mesh axis names, one per role that may be split.
SHARD_ROLES: tuple[str, ...] = ("batch", "head")


class NotShardable(Exception):
    """The family provides no hooks to run it sharded (reported as SKIP)."""


@dataclasses.dataclass(frozen=True)
class ShardResult:
    """One case run sharded: the mesh, and the verdicts against the reference."""

    case: Any
    mesh: Mapping[str, int]
    passed: bool
    detail: str
    seconds: float


def mesh_shapes(sizes: Mapping[str, int], max_devices: int = DEVICES) -> list[dict[str, int]]:
    """Batch x head splits (largest first) that divide the batch, the query heads and
    the kv heads, using at most ``max_devices`` devices and more than one."""
    out = []
    for nb in (4, 2, 1):
        for nh in (4, 2, 1):
            if 1 < nb * nh <= max_devices and sizes["batch"] % nb == 0 and (
                    sizes["head"] % nh == 0 and sizes["kv_head"] % nh == 0):
                out.append({"batch": nb, "head": nh})
    return sorted(out, key=lambda m: -m["batch"] * m["head"])


def _mesh_axis(role: str | None) -> str | None:
    return "head" if role in ("head", "kv_head") else role


def _spec(roles: Sequence[str | None], mesh: Mapping[str, int], shape: Sequence[int]
          ) -> Any:
    """Splits an array's batch and head axes (query or kv heads) over the mesh; a size-1
    (broadcast) axis stays whole."""
    from jax.sharding import PartitionSpec

    axes = []
    for role, size in zip(roles, shape, strict=True):
        name = _mesh_axis(role)
        axes.append(name if name in mesh and mesh[name] > 1 and size > 1 else None)
    return PartitionSpec(*axes)


def run_sharded(family: Any, case: Any, mesh_shape: Mapping[str, int],
                impl: Any = None, backend_name: str = "interpret") -> ShardResult:
    """Runs ``case`` split over ``mesh_shape`` and judges it against the reference (the
    implementation traced and run with the backend as its ``current_backend()``)."""
    from kernel_harness.core.backends import resolve_backend, running_on

    with running_on(resolve_backend(backend_name)) as backend:
        return _run_sharded(family, case, mesh_shape, impl, backend)


def _run_sharded(family: Any, case: Any, mesh_shape: Mapping[str, int], impl: Any,
                 backend: Any) -> ShardResult:
    import jax

    from kernel_harness.checks.metamorphic import roles_of
    from kernel_harness.run.runner import judge_outputs, low_precision_outputs

    hooks = family.metamorphic
    local = hooks.local_case(case, mesh_shape)
    if local is None:
        raise ValueError(f"{family.name}: cannot split {dict(mesh_shape)} for this case")
    inputs = case.materialize()
    fn = hooks.traceable(impl, local, backend)
    names = [n for n in mesh_shape if mesh_shape[n] > 1]
    devices = np.array(jax.devices("cpu")[: int(np.prod([mesh_shape[n] for n in names]))])
    mesh = jax.sharding.Mesh(devices.reshape([mesh_shape[n] for n in names]), tuple(names))
    expected = family.reference(case, inputs)
    in_specs = {k: _spec(roles_of(family, k), mesh_shape, np.shape(v))
                for k, v in inputs.items()}
    out_specs = {k: _spec(roles_of(family, k), mesh_shape, np.shape(expected[k]))
                 for k in family.output_axes}
    # An output not split along a mesh axis (no such axis, or size 1) is the gradient of
    # an input shared along it (a head-shared bias, per-head sinks under a batch split):
    # each shard holds a partial sum, so add the shards up.
    def shared_axes(name: str) -> tuple[str, ...]:
        split = {_mesh_axis(r) for r, n in zip(roles_of(family, name),
                                              np.shape(expected[name]), strict=True) if n > 1}
        return tuple(a for a in names if a not in split)

    summed = {k: shared_axes(k) for k in out_specs}

    def local(x: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in fn(x).items() if k in out_specs}
        return {k: jax.lax.psum(v, summed[k]) if summed[k] else v for k, v in out.items()}

    sharded = compat.shard_map_unchecked(local, mesh=mesh, in_specs=(in_specs,),
                                         out_specs=out_specs)
    start = time.perf_counter()
    outputs = jax.jit(sharded)({k: np.asarray(v) for k, v in inputs.items()})
    actual = {k: np.asarray(v, np.float32) for k, v in outputs.items()}
    # The traceable program computes the declared outputs only (no same_as extras).
    verdicts, _ = judge_outputs(family, case, actual, expected, same_as=False,
                                low_precision=low_precision_outputs(family, case, inputs,
                                                                    backend))
    bad = [f"{v.stats.output}: {'; '.join(v.problems)} at {v.stats.worst_location}"
           for v in verdicts if not v.passed]
    return ShardResult(case=case, mesh=dict(mesh_shape), passed=not bad,
                       detail="; ".join(bad) or "all outputs within tolerance",
                       seconds=time.perf_counter() - start)


def check_family(name: str, *, examples: int, seed: int = 0) -> list[ShardResult]:
    """Draws cases that can be split and runs each on its largest mesh (in this process:
    the device count must already be set)."""
    import hypothesis
    from hypothesis import given

    from kernel_harness.checks.metamorphic import problem_sizes
    from kernel_harness.records.registry import get_family

    family = get_family(name)
    if family.metamorphic is None or family.metamorphic.traceable is None or (
            family.metamorphic.local_case is None):
        raise NotShardable(f"{name} has no traceable/local_case hooks: it cannot be sharded")
    results: list[ShardResult] = []

    def meshes(case: Any) -> list[dict[str, int]]:
        sizes = problem_sizes(family, case.materialize())
        return [m for m in mesh_shapes(sizes) if family.metamorphic.local_case(case, m)]

    @hypothesis.seed(seed)
    @hypothesis.settings(max_examples=examples, deadline=None, database=None,
                         phases=[hypothesis.Phase.generate],
                         suppress_health_check=list(hypothesis.HealthCheck))
    @given(case=family.cases().filter(lambda c: bool(meshes(c))))
    def collect(case: Any) -> None:
        results.append(run_sharded(family, case, meshes(case)[0]))

    collect()
    return results


def run_in_subprocess(families: Sequence[str], *, examples: int, seed: int = 0,
                      timeout: float = 1800) -> tuple[int, str]:
    """Runs the sharding check in a fresh interpreter with a 4-device CPU mesh;
    returns its exit code and output."""
    cmd = [sys.executable, "-m", "kernel_harness.checks.sharding", *families,
           "--examples", str(examples), "--seed", str(seed)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the subprocess: sets the device count first, then checks."""
    parser = argparse.ArgumentParser(prog="python -m kernel_harness.checks.sharding")
    parser.add_argument("family", nargs="+")
    parser.add_argument("--examples", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    compat.set_cpu_device_count(DEVICES)
    import jax

    if len(jax.devices("cpu")) < DEVICES:
        print(f"sharding: only {len(jax.devices('cpu'))} CPU devices (jax was initialized "
              "before the device count could be set)")
        return 2
    failed = 0
    for name in args.family:
        try:
            results = check_family(name, examples=args.examples, seed=args.seed)
        except NotShardable as e:
            print(f"{name:<10} SKIP ({e})")
            continue
        for r in results:
            mesh = " x ".join(f"{k}={v}" for k, v in r.mesh.items())
            print(f"{name:<10} {'PASS' if r.passed else 'FAIL'} mesh {mesh} ({r.seconds:.1f}s): "
                  f"{r.detail}\n           case: {r.case.to_json()}")
        failed += sum(not r.passed for r in results)
        if not results:
            print(f"{name:<10} FAIL (no case could be split)")
            failed += 1
    print(f"sharding: {failed} failure(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
