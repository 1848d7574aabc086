"""How flywheel-tpu's fused conv1d + linear attention serving kernels are called
(``linear_attention.fused_conv1d_gdn`` and ``fused_conv1d_kda``; the families
flywheel-tpu-gdn and flywheel-tpu-kda), written once: the same operands (the op's serving
call, :mod:`kernel_harness.ops.delta_rule.serving`), the same options and results.

The kernels are TPU kernels without an ``interpret`` switch that ask the chip for its lane
count and VMEM (``pltpu.get_tpu_info``): on the CPU backends they run in the harness's TPU
interpret mode with its interpreter extensions (they read refs through reshapes) under an
abstract one-device mesh naming a v6e (how jax lets a CPU host answer the chip's
questions). Where flywheel-tpu cannot be used (Python < 3.12) the families have no backend.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np

from kernel_harness.families.flywheel_tpu import library
from kernel_harness.ops.delta_rule.serving import ServingCase, untouched_slots
from kernel_harness.records.adapter import TPU_BACKENDS, Adapter, JittedTpuProgram

#: The chip an interpreted call is lowered as (the kernel sizes its VMEM and lanes by it).
DEVICE_KIND = "TPU v6 lite"

#: The operands in the kernels' order (the gate input, ``a``, is KDA's ``g``).
OPERANDS = ("qkv", "b", "a", "conv_state", "recurrent_state", "conv_weight", "conv_bias",
            "a_log", "dt_bias", "query_start_loc", "state_indices", "distribution",
            "seq_lens", "read_state_indices")


def signature(function: str, gate: str) -> str:
    """The kernels' shared call, ``gate`` saying the gate input's name and layout."""
    return (
        f"{function}(qkv, b, {gate}, conv_state, recurrent_state, conv_weight, conv_bias, "
        "a_log, dt_bias, query_start_loc, state_indices, distribution, seq_lens, "
        "read_state_indices, *, n_kq, n_v, d_k, d_v, kernel_size) -> ((conv_state, "
        "recurrent_state), out); qkv bfloat16 [tokens, 2 n_kq d_k + n_v d_v]; b float32 "
        "[tokens, n_v]; conv_state float32 [slots, kernel_size - 1, dim]; recurrent_state "
        "float32 [slots, n_v, d_k, d_v]; conv_weight [dim, 1, kernel_size]; conv_bias [dim] "
        "or None; a_log [n_v]; int32 query_start_loc [max_seqs + 1], state_indices, "
        "seq_lens, read_state_indices [max_seqs], distribution [3]; out bfloat16 "
        "[tokens, n_v d_v]")


def _call(*arrays: Any, impl: Any, with_bias: bool, **options: Any) -> Any:
    """``impl`` on the operands (None for an absent bias), results flattened to
    (out, conv_state, recurrent_state)."""
    args = list(arrays)
    if not with_bias:
        args.insert(OPERANDS.index("conv_bias"), None)
    (conv, recurrent), out = impl(*args, **options)
    return out, conv, recurrent


@functools.lru_cache(maxsize=64)
def _bound(impl: Any, with_bias: bool) -> Any:
    """``impl`` called with the operands a case passes (one function per pair, so the
    program cache keeps one compiled program per case shape)."""
    def bound(*arrays: Any, **options: Any) -> Any:
        return _call(*arrays, impl=impl, with_bias=with_bias, **options)

    bound.__name__ = getattr(impl, "__name__", "impl")
    return bound


@contextlib.contextmanager
def as_tpu_chip() -> Iterator[None]:
    """An abstract one-device mesh of :data:`DEVICE_KIND`: ``pltpu.get_tpu_info`` answers
    for that chip on a CPU host (on a TPU the kernel asks the same questions)."""
    device = jax.sharding.AbstractDevice(device_kind=DEVICE_KIND, num_cores=1,
                                         platform="tpu")
    mesh = jax.sharding.AbstractMesh((1,), ("chip",), abstract_device=device,
                                     axis_types=(jax.sharding.AxisType.Auto,))
    with jax.sharding.use_abstract_mesh(mesh):
        yield


def untouched_bits(case: ServingCase, conv: np.ndarray, recurrent: np.ndarray) -> np.ndarray:
    """float32 [2, n]: the 32-bit patterns of every element of the slots no sequence
    writes (both pools), as their high and low 16-bit halves (exact in float32): what
    must come back bit for bit."""
    slots = untouched_slots(case)
    flat = np.concatenate([np.asarray(conv, np.float32)[slots].ravel(),
                           np.asarray(recurrent, np.float32)[slots].ravel()])
    bits = flat.view(np.uint32)
    return np.stack([bits >> 16, bits & 0xFFFF]).astype(np.float32)


class _Program(JittedTpuProgram):
    """The kernel's program: the bias operand only where the case has one, traced under
    :func:`as_tpu_chip`; ``untouched_bits`` added from the pools."""

    def traceable(self, impl: Any, case: Any, backend: Any) -> Any:
        f = super().traceable(_bound(impl or self.kernel, case.conv_bias), case, backend)

        def traced(inputs: dict[str, Any]) -> dict[str, Any]:
            with as_tpu_chip():
                return f(inputs)

        return traced

    def run(self, impl: Any, case: Any, inputs: Any, backend: Any) -> Any:
        out = super().run(impl, case, inputs, backend)
        out["untouched_bits"] = untouched_bits(case, out["conv_state"],
                                               out["recurrent_state"])
        return out


def program(family: str, kernel: Callable[..., Any],
            options: Callable[[dict[str, Any]], dict[str, Any]] = lambda fields: {}
            ) -> JittedTpuProgram:
    """The family's program: ``kernel`` on the op's operands with the case's head sizes
    and conv taps (and ``options(fields)``), returning out, conv_state, recurrent_state
    (and untouched_bits)."""
    def keywords(fields: dict[str, Any], interpreted: bool) -> dict[str, Any]:
        return {"n_kq": fields["key_heads"], "n_v": fields["value_heads"],
                "d_k": fields["key_dim"], "d_v": fields["value_dim"],
                "kernel_size": fields["kernel_size"], **options(fields)}

    return _Program(
        family=family, kernel=kernel, options=keywords, extended=True,
        operands=lambda case: tuple(n for n in OPERANDS if n != "conv_bias" or case.conv_bias),
        outputs=("out", "conv_state", "recurrent_state"),
        shapes=lambda case, inputs: [(case.tokens, case.value_heads * case.value_dim),
                                     inputs["conv_state"].shape,
                                     inputs["recurrent_state"].shape])


def adapter(spec: JittedTpuProgram, impl_signature: str) -> Adapter:
    """The family's adapter: no backend where flywheel-tpu cannot be used."""
    return spec.adapter(impl_signature=impl_signature, backends=library.backends(TPU_BACKENDS))
