"""Adapter running splash attention (TPU Pallas) forward, with residuals, and its vjp.

The implementation under test is a splash *factory* with the signature of
``make_splash_mha``: it takes the (static) multi-head mask and block sizes and
returns a per-example kernel ``kernel(q, k, v, segment_ids, sinks)``. The
adapter builds the mask from the case with splash's own mask classes (that is
the kernel's API), builds one kernel without and one with ``save_residuals``,
and jits ``vmap``-over-batch forward + vjp once per static configuration.

``BlockSizes``, ``QKVLayout`` and ``SegmentIds`` are taken from the module that
defines the implementation when it has them, so ``--impl my_copy:make_splash_mha``
runs an edited copy of ``splash_attention_kernel.py`` with its own classes.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
import types
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as _splash
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib

from kernel_harness.core.backends import Backend
from kernel_harness.families.splash.cases import SplashCase
from kernel_harness.ops.attention.masks import MaskExpr, numpy_pattern, parse_mask, visible_keys
from kernel_harness.records.adapter import TPU_BACKENDS, Adapter, traced_run

#: The default implementation: splash's public factory (``is_mqa`` is passed explicitly).
make_splash_mha = _splash.make_splash_mha

IMPL_SIGNATURE = (
    "impl(mask, *, block_sizes, is_mqa, save_residuals, attn_logits_soft_cap, head_shards=1, "
    "q_seq_shards=1, interpret) -> kernel  (the signature of splash's make_splash_mha, is_mqa "
    "given explicitly); kernel(q, k, v, segment_ids, sinks) -> out, or (out, (logsumexp,)) "
    "with save_residuals, for ONE example: q [heads, q_len, d] pre-scaled by 1/sqrt(d), "
    "k/v [kv_heads, kv_len, d] ([kv_len, d] when is_mqa), segment_ids SegmentIds(q, kv) or "
    "None, sinks [heads] float32 or None; differentiable in q, k, v, sinks. mask is a "
    "splash MultiHeadMask. BlockSizes/QKVLayout/SegmentIds come from impl's own module when "
    "it defines them (so `--impl my_splash_copy:make_splash_mha` runs an edited copy of "
    "splash_attention_kernel.py), else from the installed splash. A factory with a keyword "
    "parameter `mask_description` also gets the mask in a library-neutral form: a "
    "MaskDescription (per-head mask strings, their parsed form, and `dense`, a "
    "[heads, q_len, kv_len] bool numpy array; True = attend; segments not included)."
)


@dataclasses.dataclass(frozen=True)
class MaskDescription:
    """The case's mask without jax's mask classes, for factories of other libraries.

    Attributes:
      specs: the mask string of every query head (the harness's mask language).
      parsed: each head's parsed :class:`MaskExpr` (kind, params, children).
      dense: ``[heads, q_len, kv_len]`` bool, True where a query may attend a key (the
        static mask only; segment ids are passed to the kernel separately).
    """

    specs: tuple[str, ...]
    parsed: tuple[MaskExpr, ...]
    dense: np.ndarray


def mask_description(case: SplashCase) -> MaskDescription:
    """The case's :class:`MaskDescription`, built from the description (not from jax's
    mask objects)."""
    specs = case.head_masks()
    return MaskDescription(
        specs=specs, parsed=tuple(parse_mask(s) for s in specs),
        dense=np.array(visible_keys((specs, case.q_len, case.kv_len, None, None))),
    )


def takes_mask_description(impl: Callable[..., Any]) -> bool:
    """Whether the factory ``impl`` has a ``mask_description`` keyword parameter."""
    try:
        params = inspect.signature(impl).parameters
    except (TypeError, ValueError):
        return False
    p = params.get("mask_description")
    return p is not None and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)

SPLASH_BACKENDS = TPU_BACKENDS


def splash_module(impl: Callable[..., Any]) -> types.ModuleType:
    """The module providing BlockSizes/QKVLayout/SegmentIds for ``impl``."""
    target = impl
    while isinstance(target, functools.partial):
        target = target.func
    module = sys.modules.get(getattr(target, "__module__", "") or "")
    needed = ("BlockSizes", "QKVLayout", "SegmentIds")
    if module is not None and all(hasattr(module, n) for n in needed):
        return module
    return _splash


def _kernel_leaf(expr: MaskExpr, shape: tuple[int, int]) -> mask_lib.Mask:
    """One mask expression as splash mask objects (the kernel's mask API)."""
    if expr.kind in ("and", "or"):
        a, b = (_kernel_leaf(c, shape) for c in expr.children)
        return mask_lib.LogicalAnd(a, b) if expr.kind == "and" else mask_lib.LogicalOr(a, b)
    if expr.kind == "numpy":
        inner = _kernel_leaf(expr.children[0], shape)
        return mask_lib.NumpyMask(np.asarray(inner[0 : shape[0], 0 : shape[1]], dtype=bool))
    if expr.kind in ("random", "boxes"):
        return mask_lib.NumpyMask(numpy_pattern(expr, shape))
    p = dict(expr.params)
    if expr.kind == "full":
        return mask_lib.FullMask(shape)
    if expr.kind == "causal":
        return mask_lib.CausalMask(shape, offset=p["offset"])
    if expr.kind == "local":
        return mask_lib.LocalMask(shape, window_size=(p["left"], p["right"]), offset=p["offset"])
    if expr.kind == "chunked":
        return mask_lib.ChunkedCausalMask(shape, chunk_size=p["chunk"])
    raise ValueError(f"unknown mask kind {expr.kind!r}")


def kernel_mask(case: SplashCase) -> mask_lib.MultiHeadMask:
    """The case's masks as a splash ``MultiHeadMask`` (equal specs share one object)."""
    shape = (case.q_len, case.kv_len)
    by_spec = {s: _kernel_leaf(parse_mask(s), shape) for s in set(case.head_masks())}
    return mask_lib.MultiHeadMask(tuple(by_spec[s] for s in case.head_masks()))


def block_sizes(case: SplashCase, module: types.ModuleType = _splash) -> Any:
    """The case's ``module.BlockSizes``."""
    layout = {"head_dim_minor": module.QKVLayout.HEAD_DIM_MINOR,
              "seq_minor": module.QKVLayout.SEQ_MINOR}
    return module.BlockSizes(
        block_q=case.block_q, block_kv=case.block_kv, block_kv_compute=case.block_kv_compute,
        block_q_dkv=case.block_q_dkv, block_kv_dkv=case.block_kv_dkv,
        block_kv_dkv_compute=case.block_kv_dkv_compute,
        block_q_dq=case.block_q_dq, block_kv_dq=case.block_kv_dq,
        use_fused_bwd_kernel=case.fused_bwd,
        q_layout=layout[case.q_layout], k_layout=layout[case.k_layout],
        v_layout=layout[case.v_layout],
    )


@functools.lru_cache(maxsize=48)
def jitted_program(impl: Callable[..., Any], key: SplashCase, backend: Backend
                   ) -> Callable[..., Any]:
    """Jitted ``(q, k, v, do, sinks, seg_q, seg_kv) -> outputs`` for one static config."""
    case = key
    module = splash_module(impl)
    factory = functools.partial(
        impl, kernel_mask(case), block_sizes=block_sizes(case, module), is_mqa=case.mqa,
        attn_logits_soft_cap=case.soft_cap, head_shards=1, q_seq_shards=1,
        interpret=backend.pallas_interpret(),
        **({"mask_description": mask_description(case)} if takes_mask_description(impl)
           else {}),
    )
    plain, with_lse = factory(save_residuals=False), factory(save_residuals=True)

    def program(q, k, v, do, sinks, seg_q, seg_kv):
        segs = module.SegmentIds(q=seg_q, kv=seg_kv) if case.q_segments is not None else None
        if case.mqa:
            k, v = k[:, 0], v[:, 0]

        def batched(kernel, q, k, v, sinks):
            return jax.vmap(lambda q1, k1, v1: kernel(q1, k1, v1, segs, sinks))(q, k, v)

        out = batched(plain, q, k, v, sinks)
        out_residuals, (lse,) = batched(with_lse, q, k, v, sinks)
        if case.sinks:
            out_vjp, vjp = jax.vjp(functools.partial(batched, plain), q, k, v, sinks)
            dq, dk, dv, dsinks = vjp(do)
        else:
            out_vjp, vjp = jax.vjp(lambda q, k, v: batched(plain, q, k, v, None), q, k, v)
            (dq, dk, dv), dsinks = vjp(do), jnp.zeros((0,), jnp.float32)
        if case.mqa:
            dk, dv = dk[:, None], dv[:, None]
        return {"out": out, "dq": dq, "dk": dk, "dv": dv, "lse": lse, "dsinks": dsinks,
                "out_residuals": out_residuals, "out_vjp": out_vjp}

    return jax.jit(program)


def traceable(impl: Callable[..., Any] | None, case: SplashCase, backend: Backend
              ) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``impl``'s jitted program as ``f(inputs) -> outputs``: ``out`` from the plain forward,
    ``lse`` and ``out_residuals`` from the ``save_residuals`` forward, ``out_vjp`` (the
    primal) and ``dq/dk/dv/dsinks`` from ``jax.vjp`` with cotangent ``do``; ``dsinks`` is
    empty (shape (0,)) when the case has no sinks."""
    # The data fields (seed, logit_scale: only materialize reads it) are not the program's.
    program = jitted_program(impl or make_splash_mha,
                             dataclasses.replace(case, seed=0, logit_scale=1.0), backend)
    no_ids = np.zeros((0,), np.int32)

    def f(inputs: dict[str, Any]) -> dict[str, Any]:
        return program(
            inputs["q"], inputs["k"], inputs["v"], inputs["do"],
            inputs["sinks"] if case.sinks else None,
            inputs.get("q_segment_ids", no_ids), inputs.get("kv_segment_ids", no_ids),
        )

    return f


#: How the splash family calls its kernel.
ADAPTER = Adapter(kernel=make_splash_mha, impl_signature=IMPL_SIGNATURE,
                  run=traced_run(traceable), backends=SPLASH_BACKENDS)
