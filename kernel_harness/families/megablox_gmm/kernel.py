"""Adapter running megablox ``gmm`` (custom VJP: ``gmm`` for dlhs, ``tgmm`` for drhs) on a
backend.

``gmm`` takes ``interpret=`` directly: ``True`` on ``interpret`` (the generic Pallas
interpreter), TPU interpret parameters on ``tpu-interpret``, ``False`` on ``tpu``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas.ops.tpu.megablox import ops as _ops

from kernel_harness.core.backends import Backend, current_backend
from kernel_harness.ops.grouped_matmul.cases import GmmCase, gmm_cases
from kernel_harness.records.adapter import TPU_BACKENDS, Adapter, traced_run
from kernel_harness.records.claims import Claim, LargeSizes, Span, Tier

#: The default implementation: megablox's differentiable ``gmm`` (ops.gmm).
gmm = _ops.gmm

IMPL_SIGNATURE = (
    "gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset, "
    "existing_out, transpose_rhs, interpret) -> out; lhs: [m, k], rhs: [groups, k, n] "
    "([groups, n, k] with transpose_rhs), group_sizes: int32 [num_groups] (may exceed the "
    "rhs groups when group_offset, an int32 scalar, selects a shard), out: [m, n]; "
    "differentiable with jax.vjp in lhs and rhs"
)

GMM_BACKENDS = TPU_BACKENDS


@functools.lru_cache(maxsize=64)
def _program(impl: Callable[..., Any], key: tuple[Any, ...], interpret: Any) -> Callable:
    """Jitted ``(lhs, rhs, group_sizes, group_offset, do) -> outputs`` for one static case."""
    fields = dict(key)
    out_dtype = jnp.dtype(fields["out_dtype"])
    tiling, transpose = fields["tiling"], fields["transpose_rhs"]
    has_offset = fields["has_offset"]

    def program(lhs, rhs, group_sizes, group_offset, do):
        def f(lhs, rhs):
            return impl(lhs, rhs, group_sizes, out_dtype, tiling,
                        group_offset if has_offset else None, None, transpose, interpret)

        out, vjp = jax.vjp(f, lhs, rhs)
        dlhs, drhs = vjp(do)
        return {"out": out, "dlhs": dlhs, "drhs": drhs}

    # CPU programs (interpreted kernels) run once per case: skip LLVM's backend
    # optimizations, which roughly double compile time.
    options = None if interpret is False else {"xla_backend_optimization_level": 0}
    return jax.jit(program, compiler_options=options)


def traceable(impl: Callable[..., Any] | None, case: GmmCase, backend: Backend
              ) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``impl``'s jitted program forward and backward as ``f(inputs) -> outputs`` (out, dlhs,
    drhs); ``interpret`` is the backend's (False for ``tpu``: the Mosaic lowering runs)."""
    program = _program(impl or gmm, case.static_key(), backend.pallas_interpret())

    def f(inputs: dict[str, Any]) -> dict[str, Any]:
        # A scalar (the golden store keeps it as shape (1,)); gmm wants an int32 of shape ().
        offset = jnp.asarray(inputs.get("group_offset", 0), jnp.int32).reshape(())
        return program(inputs["lhs"], inputs["rhs"], inputs["group_sizes"], offset,
                       inputs["do"])

    return f


#: The tiling each claimed size is traced with, by its dtype (a rung of the ladder keeps its
#: claimed size's dtype): the bfloat16 layer with the tiles its users pass on a TPU
#: (MaxText's megablox default, (512, 1024, 1024): tm 512 rows of tokens per step), the
#: float32 one (and the small size) with the kernel's default (128, 128, 128).
_TILINGS: dict[str, tuple[int, int, int]] = {"bfloat16": (512, 1024, 1024),
                                             "float32": (128, 128, 128)}


def _tiling(arrays: dict[str, Any]) -> tuple[int, int, int]:
    """The tiling ``arrays`` (a claimed size, a rung or the small size) are traced with:
    their dtype's (:data:`_TILINGS`), tm halved until it divides the rows (the kernel needs
    m % tm == 0; a rung's rows are a multiple of 256, the claimed sizes' of 512)."""
    tm, tk, tn = _TILINGS[jnp.dtype(arrays["lhs"].dtype).name]
    m = arrays["lhs"].shape[0]
    while tm > 1 and m % tm:
        tm //= 2
    return tm, tk, tn


def claimed_call(impl: Callable[..., Any], arrays: dict[str, Any]) -> Any:
    """``impl`` called as :func:`_program` calls it (forward under ``jax.vjp`` and its
    backward: dlhs, drhs), float32 out, the tiling of :func:`_tiling`, every group in the
    rhs, on (abstract) arrays (``Claim.call``)."""
    interpret = current_backend().pallas_interpret()
    tiling = _tiling(arrays)

    def f(lhs, rhs):
        return impl(lhs, rhs, arrays["group_sizes"], jnp.float32, tiling, None,
                    None, False, interpret)

    out, vjp = jax.vjp(f, arrays["lhs"], arrays["rhs"])
    return out, vjp(arrays["do"])


def _gmm_arrays(m: int, k: int, n: int, groups: int, dtype: Any
                ) -> dict[str, jax.ShapeDtypeStruct]:
    return {"lhs": jax.ShapeDtypeStruct((m, k), dtype),
            "rhs": jax.ShapeDtypeStruct((groups, k, n), dtype),
            "group_sizes": jax.ShapeDtypeStruct((groups,), jnp.int32),
            "do": jax.ShapeDtypeStruct((m, n), jnp.float32)}


#: The claimed sizes' dtypes, in CLAIM's order (the large examples draw one case of each).
_DTYPES = ("bfloat16", "float32", "float32")
#: Groups and contractions past the drawn ones (at most 16 groups, k at most 384).
_GROUPS, _K = 17, 385


#: Real examples up to the claimed sizes (``large-sizes``): the bfloat16 layer's 64 experts,
#: the float32 one's long contraction; m and n capped (interpreting the grid of tiles costs:
#: 64 groups over 128 rows took 6.5 s, k 4096 in 512-column tiles 12 s).
LARGE = LargeSizes(
    names=("64 experts, bfloat16", "8 experts of k 6144, float32",
           "a routing collapse: every row in 2 experts, float32"),
    cases=lambda i, spans, without: gmm_cases(dtypes=(_DTYPES[i],), without=without,
                                              sizes=spans),
    uses=lambda i: frozenset({_DTYPES[i]}),
    tiers={
        "ci": Tier(why="the claimed 64 groups over 128 rows of k = n = 128 (of 32768 x 4096 "
                   "x 14336: k 2048 took 590 s, the backward's grid of groups and k tiles); "
                   "the float32 contraction k up to 4096 (of 6144) over 128 rows, n = 128, "
                   "its claimed 8 groups; the routing collapse at half its claimed rows, "
                   "16384 (two experts of 8192 rows, past the drawn 1536; 8192 rows took "
                   "12 s), k = n = 128: interpreting the grid of tiles costs; one example, at "
                   "the caps",
                   examples=1,
                   spans=({"m": Span(128, 128), "k": Span(128, 128), "n": Span(128, 128),
                           "groups": Span(_GROUPS, 64)},
                          {"m": Span(128, 128), "k": Span(_K, 4096), "n": Span(128, 128),
                           "groups": Span(8, 8)},
                          {"m": Span(2048, 16384), "k": Span(128, 128), "n": Span(128, 128),
                           "groups": Span(2, 2)})),
        "nightly": Tier(why="m up to 1024 rows and n up to 512 (of 16k-32k and 4k-14k), "
                        "k up to 1024 beside 64 groups and up to the claimed 6144 beside 8",
                        spans=({"m": Span(128, 1024), "k": Span(128, 1024),
                                "n": Span(128, 512), "groups": Span(_GROUPS, 64)},
                               {"m": Span(128, 1024), "k": Span(_K, 6144),
                                "n": Span(128, 512), "groups": Span(8, 8)},
                               {"m": Span(2048, 32768), "k": Span(128, 512),
                                "n": Span(128, 512), "groups": Span(2, 2)})),
    })


#: The largest grouped matmuls the kernel is meant for: a mixture-of-experts layer's
#: routed tokens against its experts' weights, traced at those sizes by
#: ``claimed-sizes``. Every size a multiple of the tiles (``sizes-below-128`` kept).
CLAIM = Claim(
    reason="a mixture-of-experts layer: 16k-32k routed token rows over 8-64 experts, "
    "model dims 4k-14k (an expert FFN's up projection, bfloat16, with the production "
    "tiling its users pass, (512, 1024, 1024); 8 large float32 experts, default tiling; a "
    "routing collapse, every row in 2 experts)",
    sizes=lambda: (_gmm_arrays(32768, 4096, 14336, 64, jnp.bfloat16),
                   _gmm_arrays(16384, 6144, 4096, 8, jnp.float32),
                   _gmm_arrays(32768, 4096, 4096, 2, jnp.float32)),
    small=lambda: _gmm_arrays(256, 128, 128, 2, jnp.float32),
    call=claimed_call,
    large=LARGE,
    # Under the claimed sizes (too large to hold for the wrapper comparison), each axis
    # near its claimed extent with the others small: the contraction, the columns, the
    # experts (8 and 64, bfloat16), a group of thousands of rows.
    stand_in_sizes=lambda: (_gmm_arrays(256, 6144, 256, 8, jnp.float32),
                            _gmm_arrays(256, 512, 14336, 2, jnp.bfloat16),
                            _gmm_arrays(2048, 512, 512, 8, jnp.bfloat16),
                            _gmm_arrays(4096, 256, 256, 64, jnp.bfloat16),
                            _gmm_arrays(8192, 256, 256, 2, jnp.float32),
                            _gmm_arrays(8192, 256, 256, 2, jnp.bfloat16)),
    integers=lambda name, a, arrays, rng: group_sizes_at(arrays["lhs"].shape[0],
                                                          a.shape[0], rng))


def group_sizes_at(rows: int, groups: int, rng: Any) -> Any:
    """``rows`` split among ``groups`` at random cuts (some groups empty, one often large)."""
    cuts = np.sort(rng.integers(0, rows + 1, groups - 1))
    return np.diff(np.concatenate([[0], cuts, [rows]]))


#: How the megablox-gmm family calls its kernel.
ADAPTER = Adapter(kernel=gmm, impl_signature=IMPL_SIGNATURE, run=traced_run(traceable),
                  backends=GMM_BACKENDS)
