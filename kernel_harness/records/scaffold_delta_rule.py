"""The text of ``kernel-harness init --op delta-rule``'s files: a family on the built-in
delta-rule op (``kernel_harness.ops.delta_rule``), modelled on
``examples/chunked_delta_rule.py``. Text only: the records layer does not import the ops.

:mod:`string.Template` as :mod:`~kernel_harness.records.scaffold_templates` (whose
``PYPROJECT`` and ``GITIGNORE`` the op shares), and ``$interpret_arg`` (the ``interpret=``
argument of the call, empty for a kernel without one), ``$run`` (the adapter's ``run``:
:data:`RUN` or, without ``interpret=``, :data:`FORCED_RUN`), ``$interpret_sig``
(``, interpret`` in the signature or nothing) and ``$kernel_note`` (what the kernel is:
the placeholder or yours).
"""

#: ``$interpret_arg`` of a kernel that takes ``interpret=``.
INTERPRET_ARG = ",\n                             interpret=backend.pallas_interpret()"

#: ``$run`` of a kernel that takes ``interpret=``.
RUN = "    run=traced_run(traceable),"

#: ``$run`` of a kernel without ``interpret=``: Pallas's TPU interpret mode off a TPU.
FORCED_RUN = '''\
    # $todo your kernel takes no interpret=: off a TPU it is
    # traced in Pallas's TPU interpret mode; drop the context if it picks its own
    # (kernel_harness.current_backend()).
    run=traced_run(traceable, context=lambda case, backend: backend.forcing_interpret()),'''

INIT = '''\
"""The kernel-harness family $name: $kernel on the delta-rule op.

``family`` (``FAMILY``): the op (kernel_harness.ops.delta_rule) gives the case, the
strategy, the events, the token-serial reference and the relations; the family says how
the kernel is called and what it supports.
"""
'''

FAMILY = '''\
"""``FAMILY``: $kernel as the kernel-harness family ``$name``,
on the delta-rule op.

$kernel_note

Found by the harness through the ``$group`` entry point (installed) or
``family-modules`` in this folder's pyproject.toml; ``kernel-harness describe $name``
prints the contract below.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from kernel_harness import (
    DELTA_RULE_RELATIONS,
    Adapter,
    Backend,
    DeltaRuleCase,
    Family,
    KernelExpectation,
    Metamorphic,
    SliceFloor,
    Tolerance,
    ToleranceTable,
    chunk_variants,
    delta_rule_as_mha,
    delta_rule_cases,
    delta_rule_events,
    delta_rule_reference,
    traced_run,
)

from $module import $func as kernel

# $todo the chunk sizes and head dims your kernel takes
# (each drawn; the chunk sizes varied with the same data by block-size-invariance).
CHUNKS = (8, 16, 32)
KEY_DIMS = (8, 16)
VALUE_DIMS = (8, 16)


def cases(*, without: frozenset[str] = frozenset()) -> Any:
    """The op's strategy with this kernel's chunks and heads."""
    # $todo dtypes=("float32", "bfloat16") if your kernel
    # takes bfloat16 (and their tolerances).
    return delta_rule_cases(chunk_sizes=CHUNKS, key_dims=KEY_DIMS, value_dims=VALUE_DIMS,
                            qk_l2norm=(True, False))


def traceable(impl: Any, case: DeltaRuleCase, backend: Backend) -> Any:
    """The kernel (or ``--impl``) on the case's arrays: q, k, g, b [B, L, Hk, K], v, w
    [B, L, Hv, V], h0 [B, Hv, K, V] (absent without an initial state)."""
    # $todo map the op's layout to your kernel's (transposes,
    # its argument names), and its outputs back to out [B, L, Hv, V] and final_state
    # [B, Hv, K, V] float32.
    call = functools.partial(impl or kernel, segment_ids=jnp.asarray(case.segment_ids()),
                             chunk_size=case.chunk_size, qk_l2norm=case.qk_l2norm$interpret_arg)

    def f(x: dict[str, Any]) -> dict[str, Any]:
        out, final = call(x["q"], x["k"], x["v"], x["g"], x["b"], x["w"], x.get("h0"))
        return {"out": out, "final_state": final}

    return jax.jit(f)


def seed_cases(without: frozenset[str]) -> list[DeltaRuleCase]:
    """Tried first: a document on the second chunk's first token, weak decay, an initial
    state, grouped heads and a partial last chunk."""
    return [DeltaRuleCase(dtype="float32", seed=1, batch=2, seq_len=40, key_heads=1,
                          value_heads=2, key_dim=8, value_dim=16, chunk_size=16,
                          documents=((16, 24), (5, 35)), initial_state=True, decay="weak")]


# $todo tolerances measured for your kernel, each with its reason.
_WHY = "float32 in, float32 state, token by token as the reference: float32 roundings only"
#: A token's out row sums K x V state products: right after a reset it is small.
_FLOOR = SliceFloor(1 / 16, "a row of out sums K x V state products that may cancel")
TOLERANCES = ToleranceTable({("float32", o): Tolerance(max_rel_err=2e-5, slice_floor=_FLOOR,
                                                       reason=_WHY)
                             for o in ("out", "final_state")})

#: How the harness calls the kernel.
ADAPTER = Adapter(
    kernel=kernel,
    impl_signature="impl(q, k, v, g, b, w, h0, *, segment_ids, chunk_size, "
    "qk_l2norm$interpret_sig) -> (out, final_state)",
$run
    # $todo the backends your kernel runs on:
    # interpret, tpu-interpret, tpu, gpu.
    backends=frozenset({"interpret"}),
)

FAMILY = Family(
    name="$name",
    # $todo one line saying what your kernel computes.
    summary="$kernel: the delta rule, chunk by chunk, "
    "state carried across chunks",
    case_type=DeltaRuleCase,
    cases=cases,
    **ADAPTER.fields(),
    # $todo forward only. With a backward: gradients=True,
    # capabilities {"gradients"}, and the vjp's dq, dk, dv, dg, db, dw, dh0 (cotangents
    # dout, dstate) among the adapter's outputs and output_axes.
    reference=functools.partial(delta_rule_reference, gradients=False),
    output_axes={"out": ("batch", "token", "value_head", "dim"),
                 "final_state": ("batch", "value_head", "key", "dim")},
    tolerances=TOLERANCES,
    capabilities=frozenset(),
    events=delta_rule_events,
    # The op's hard paths: ci and nightly runs reach each first.
    modes=frozenset({"multi-chunk-block", "partial-last-chunk-block", "boundary-inside-chunk",
                     "boundary-on-chunk-edge", "initial-state", "grouped-heads",
                     "decay:weak", "decay:burst", "zero-chunk"}),
    seed_cases=seed_cases,
    # No traceable hook: K, V of 8 or 16 are below Mosaic's 128-lane tiles. No query/key
    # roles: the op's documents-independent relation is its segment isolation.
    metamorphic=Metamorphic(roles={}, logit_input="q", block_variants=chunk_variants(CHUNKS),
                            as_mha=delta_rule_as_mha),
    relations=DELTA_RULE_RELATIONS,
    # $todo the fewest Pallas kernels your kernel runs forward.
    kernels=KernelExpectation(forward=1),
    # $todo your kernel's semantic choices, in words.
    contract="The delta rule of kernel_harness/ops/delta_rule/reference.py (GDN-2), forward "
    "only: out and final_state, float32; the state resets to zero at every document start "
    "after a row's first, h0 applies to the first.",
)
'''

TEST = '''\
"""Tests of the $name family: the harness's check of the kernel against the op's
reference and relations."""

from __future__ import annotations

import kernel_harness.testing

from $package.family import FAMILY


def test_the_kernel_matches_the_reference():
    """Every property of the harness (an AssertionError carrying its report if not)."""
    kernel_harness.testing.check(FAMILY, profile="dev")
'''

KERNEL = '''\
"""A placeholder Pallas kernel written by `kernel-harness init --op delta-rule`.

The delta rule (GDN-2), float32, forward only, over a grid (batch row, value head, chunk)
whose chunk axis runs in order: the state [K, V] is carried from chunk to chunk in the
final-state output block (its block index does not move along that axis), updated token
by token inside a chunk, reset where a document starts, seeded with the initial state.

$todo replace it with your kernel (and the family's adapter with its layout)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _chunk(seg_ref, q_ref, k_ref, v_ref, g_ref, b_ref, w_ref, h0_ref, o_ref, s_ref, *,
           chunk, l2):
    """One chunk of one (batch row, value head): ``s_ref`` holds the state between chunks."""
    c = pl.program_id(2)

    @pl.when(c == 0)
    def _():
        s_ref[...] = h0_ref[...].astype(jnp.float32)

    def token(t, s):
        q, k, g, b, v, w = (r[pl.ds(t, 1), :].astype(jnp.float32)  # rows [1, K] or [1, V]
                            for r in (q_ref, k_ref, g_ref, b_ref, v_ref, w_ref))
        if l2:
            q = q * jax.lax.rsqrt(jnp.sum(q * q) + 1e-6)
            k = k * jax.lax.rsqrt(jnp.sum(k * k) + 1e-6)
        i = c * chunk + t  # the token's position in the (padded) sequence
        # The previous token of a chunk's first is the last of the chunk before: the kernel
        # reads the whole row of segment ids.
        starts = seg_ref[pl.ds(i, 1)] != seg_ref[pl.ds(jnp.maximum(i - 1, 0), 1)]
        s = jnp.where(starts[:, None], 0.0, s)  # a document starts: its state is zero
        s = jnp.exp(g).T * s  # decay per key channel
        s = s + k.T @ (w * v - (b * k) @ s)  # the delta rule: erase b, write w
        o_ref[pl.ds(t, 1), :] = ((q * q.shape[-1] ** -0.5) @ s).astype(o_ref.dtype)
        return s

    s_ref[...] = jax.lax.fori_loop(0, chunk, token, s_ref[...])


def $func(q, k, v, g, b, w, h0=None, *, segment_ids, chunk_size, qk_l2norm, interpret=False):
    """``(out [B, L, Hv, V], final_state [B, Hv, K, V] float32)``; q, k, g, b ``[B, L, Hk,
    K]``, v, w ``[B, L, Hv, V]``, h0 ``[B, Hv, K, V]`` or None, segment_ids ``[B, L]``."""
    (batch, seq, key_heads, kd), (value_heads, vd) = q.shape, v.shape[2:]
    chunks = pl.cdiv(seq, chunk_size)
    pad = chunks * chunk_size - seq  # zero k and g after the last token leave the state

    def heads_first(x):
        return jnp.pad(x, ((0, 0), (0, pad), (0, 0), (0, 0))).transpose(0, 2, 1, 3)

    group = value_heads // key_heads
    key_spec = pl.BlockSpec((None, None, chunk_size, kd), lambda i, j, n: (i, j // group, n, 0))
    value_spec = pl.BlockSpec((None, None, chunk_size, vd), lambda i, j, n: (i, j, n, 0))
    state_spec = pl.BlockSpec((None, None, kd, vd), lambda i, j, n: (i, j, 0, 0))
    h0 = jnp.zeros((batch, value_heads, kd, vd), jnp.float32) if h0 is None else h0
    out, final = pl.pallas_call(
        functools.partial(_chunk, chunk=chunk_size, l2=qk_l2norm),
        grid=(batch, value_heads, chunks),
        in_specs=[pl.BlockSpec((None, seq + pad), lambda i, j, n: (i, 0)), key_spec, key_spec,
                  value_spec, key_spec, key_spec, value_spec, state_spec],
        out_specs=[value_spec, state_spec],
        out_shape=[jax.ShapeDtypeStruct((batch, value_heads, seq + pad, vd), v.dtype),
                   jax.ShapeDtypeStruct(h0.shape, jnp.float32)],
        interpret=interpret,
    )(jnp.pad(segment_ids, ((0, 0), (0, pad)), mode="edge"),
      *(heads_first(x) for x in (q, k, v, g, b, w)), h0)
    return out.transpose(0, 2, 1, 3)[:, :seq], final
'''

#: ``$kernel_note`` when init wrote the kernel.
PLACEHOLDER_NOTE = ("$kernel is a placeholder Pallas kernel of the op written by init:\n"
                    "the check passes as written.")
#: ``$kernel_note`` for the user's existing kernel.
EXISTING_NOTE = ("$kernel is your kernel: the check fails until traceable maps the\n"
                 "op's layout to yours (the places marked $todo).")
