"""A team's own attention kernel under kernel-harness by declaration: a bfloat16-only
Pallas forward kernel whose causal mask is aligned bottom-right (flash-attn's convention:
with fewer queries than keys, the last query sees every key), tiled over query blocks.

The family is its kernel's facts only: a case type (the attention problem plus its block
size, its ``Features``), a call, tolerances and a contract; the harness's attention op
draws the cases, builds the reference, the exclusions, the labels and every metamorphic
property, block-size invariance over ``block_q`` included::

    kernel-harness check bottom-right-attention --family-module examples.bottom_right_attention

``ignores_alignment`` is the same kernel with its mask aligned top-left: it fails.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
from hypothesis import strategies as st
from jax.experimental import pallas as pl

from kernel_harness import (
    ATTENTION_CALIBRATED,
    Adapter,
    AttentionProblem,
    Backend,
    Family,
    Features,
    KernelExpectation,
    Tolerance,
    ToleranceTable,
    problem_record,
    standard_floor,
    traced_run,
)


def _attend_block(q_ref, k_ref, v_ref, o_ref, *, scale, causal, block_q, offset):
    """One query block of one head against every key: softmax in float32, rows that see
    no key give zero."""
    q = q_ref[...].astype(jnp.float32) * scale
    k, v = k_ref[...].astype(jnp.float32), v_ref[...].astype(jnp.float32)
    s = q @ k.T
    if causal:
        rows = pl.program_id(2) * block_q + jnp.arange(block_q)[:, None] + offset
        s = jnp.where(jnp.arange(k.shape[0])[None, :] <= rows, s, -jnp.inf)
    m = jnp.max(s, axis=-1, keepdims=True)
    p = jnp.exp(s - jnp.where(jnp.isfinite(m), m, 0.0))
    denom = jnp.sum(p, axis=-1, keepdims=True)
    o_ref[...] = ((p @ v) / jnp.where(denom > 0, denom, 1.0)).astype(o_ref.dtype)


def attention(q, k, v, *, causal: bool, block_q: int, interpret: bool = False,
              bottom_right: bool = True):
    """``q`` ``[batch, heads, q_len, d]``, ``k``/``v`` ``[batch, kv_heads, kv_len, d]``."""
    b, h, t, d = q.shape
    kv_heads, s = k.shape[1], k.shape[2]
    group = h // kv_heads
    kernel = functools.partial(_attend_block, scale=d**-0.5, causal=causal, block_q=block_q,
                               offset=s - t if bottom_right else 0)
    kv_spec = pl.BlockSpec((None, None, s, d), lambda i, j, n: (i, j // group, 0, 0))
    return pl.pallas_call(
        kernel, grid=(b, h, t // block_q),
        in_specs=[pl.BlockSpec((None, None, block_q, d), lambda i, j, n: (i, j, n, 0)),
                  kv_spec, kv_spec],
        out_specs=pl.BlockSpec((None, None, block_q, d), lambda i, j, n: (i, j, n, 0)),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype), interpret=interpret)(q, k, v)


ignores_alignment = functools.partial(attention, bottom_right=False)


@dataclasses.dataclass(frozen=True, kw_only=True)
class BottomRightCase(AttentionProblem):
    """The attention problem as this kernel takes it, and its query block."""

    block_q: int = 8

    FEATURES = Features(layout="bhqd", names={"q": "q", "k": "k", "v": "v"},
                        optional=frozenset({"causal", "gqa", "q-len-ne-kv-len"}),
                        alignments=("bottom-right",), empty_rows="zero", gradients=False,
                        dtypes=("bfloat16",), calibrated=frozenset({"bfloat16"}),
                        max_batch=2, lengths=(16, 32, 64), q_only_lengths=(8,),
                        head_dims=(32, 64))

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.block_q < 1 or self.q_len % self.block_q:
            raise ValueError(f"block_q={self.block_q} must divide q_len={self.q_len}")


def blocks(problem: AttentionProblem) -> st.SearchStrategy[dict[str, Any]]:
    """The kernel's one block: a divisor of q_len of at least 8 rows."""
    sizes = [n for n in (8, 16, 32, 64) if problem.q_len % n == 0]
    return st.fixed_dictionaries({"block_q": st.sampled_from(sizes)})


def traceable(impl, case: BottomRightCase, backend: Backend):
    """The kernel (or ``--impl``) on the case's arrays; interpreted off an accelerator."""
    call = functools.partial(impl or attention, causal=case.is_causal, block_q=case.block_q,
                             interpret=backend.is_interpreted)
    return jax.jit(lambda x: {"out": call(x["q"], x["k"], x["v"])})


#: bfloat16 is judged by the calibrated bound: at most 2x the error of the same plain-jnp
#: math in bfloat16 (the fixed limit serves checks without that yardstick).
TOLERANCES = ToleranceTable({("bfloat16", "out"): Tolerance(
    max_rel_err=2e-2, slice_floor=standard_floor("bfloat16", gradient=False),
    calibrated=ATTENTION_CALIBRATED,
    reason="bf16 in and out, float32 softmax; the plain-jnp bf16 math errs ~4e-3 here")})

FAMILY = Family(
    name="bottom-right-attention",
    summary="examples/bottom_right_attention.py: a bf16 Pallas forward kernel, causal "
    "aligned bottom-right",
    # Declarations, not hooks: sharded over batch and heads, lowered for a v5e.
    **problem_record(BottomRightCase, blocks=blocks, traceable=traceable, shardable=True,
                     tpu_device_kind="TPU v5 lite"),
    **Adapter(kernel=attention, impl_signature="impl(q, k, v, *, causal, block_q, interpret)",
              run=traced_run(traceable), backends=frozenset({"interpret"})).fields(),
    tolerances=TOLERANCES,
    capabilities=frozenset({"causal", "gqa", "mqa", "q-len-ne-kv-len"}),
    kernels=KernelExpectation(forward=1),
    contract="softmax(q.k^T / sqrt(d)) v; causal aligned bottom-right (query i sees key j "
    "<= i + kv_len - q_len); a row that sees no key is zero; bfloat16 only, forward only.",
)
