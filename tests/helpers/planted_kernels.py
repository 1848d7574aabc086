"""Small Pallas TPU kernels of our own, correct and planted-buggy, for the diagnostics tests.

``tiny_attention`` is a one-pass (whole key range per program) segment/causal
attention kernel; the ``TOY_ATTENTION`` family wraps it with metamorphic hooks.
Planted bugs: a kernel whose second segment's queries also see the first
segment's keys (``leaky_second_segment``), one that ignores ``causal``, one
whose output depends on the block size, a kernel racing on its output block
across the two simulated cores, one reading an uninitialized scratch buffer,
and block sizes a real TPU cannot lower (``block_q=100``).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.experimental
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from kernel_harness.core.backends import Backend
from kernel_harness.core.case import Case, standard_normal
from kernel_harness.core.tolerance import FLOAT32_FLOOR as F32
from kernel_harness.core.tolerance import Tolerance, ToleranceTable
from kernel_harness.records.family import Family
from kernel_harness.records.hooks import Metamorphic, Toggle

D = 128


def _attention_kernel(q_ref, k_ref, v_ref, qs_ref, ks_ref, o_ref, *, block_q: int, causal: bool,
                      leak: bool, scale_bug: bool):
    q, k, v = q_ref[...], k_ref[...], v_ref[...]
    s = jnp.dot(q, k.T, preferred_element_type=jnp.float32)
    qs, ks = qs_ref[0], ks_ref[0]
    allowed = qs[:, None] == ks[None, :]
    if leak:  # the planted bug: segment 1's queries also see segment 0's keys
        allowed |= (qs[:, None] == 1) & (ks[None, :] == 0)
    if causal:
        rows = pl.program_id(1) * block_q + jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)
        cols = jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
        allowed &= cols <= rows
    s = jnp.where(allowed, s, -1e30)
    p = jnp.exp(s - s.max(axis=-1, keepdims=True))
    p = jnp.where(allowed, p, 0.0)
    denom = jnp.maximum(p.sum(axis=-1, keepdims=True), 1e-30)
    out = jnp.dot(p, v, preferred_element_type=jnp.float32) / denom
    if scale_bug:  # the planted bug: the output depends on the block size
        out = out * (1.0 + (block_q - 128) * 1e-3)
    o_ref[...] = out.astype(o_ref.dtype)


def tiny_attention(q, k, v, q_seg, kv_seg, *, block_q: int, causal: bool, interpret,
                   leak: bool = False, scale_bug: bool = False):
    """softmax(q k^T, masked to same segment [and key <= query]) v; q [H, Q, D], k/v
    [H, K, D], q_seg [1, Q], kv_seg [1, K] int32. Rows that see no key give 0."""
    h, n_q, d = q.shape
    n_k = k.shape[1]
    kernel = functools.partial(_attention_kernel, block_q=block_q, causal=causal, leak=leak,
                               scale_bug=scale_bug)
    return pl.pallas_call(
        kernel,
        grid=(h, n_q // block_q),
        in_specs=[
            pl.BlockSpec((None, block_q, d), lambda i, j: (i, j, 0)),
            pl.BlockSpec((None, n_k, d), lambda i, j: (i, 0, 0)),
            pl.BlockSpec((None, n_k, d), lambda i, j: (i, 0, 0)),
            pl.BlockSpec((1, block_q), lambda i, j: (0, j)),
            pl.BlockSpec((1, n_k), lambda i, j: (0, 0)),
        ],
        out_specs=pl.BlockSpec((None, block_q, d), lambda i, j: (i, j, 0)),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel")),
        interpret=interpret,
    )(q, k, v, q_seg, kv_seg)


leaky_second_segment = functools.partial(tiny_attention, leak=True)
block_dependent = functools.partial(tiny_attention, scale_bug=True)


def ignores_causal(q, k, v, q_seg, kv_seg, *, block_q, causal, interpret):
    """Planted bug: the causal flag is dropped."""
    return tiny_attention(q, k, v, q_seg, kv_seg, block_q=block_q, causal=False,
                          interpret=interpret)


_CALLS = [0]


def _tick() -> np.ndarray:
    _CALLS[0] += 1
    return np.float32(_CALLS[0])


def nondeterministic(q, k, v, q_seg, kv_seg, **kwargs):
    """Planted bug: a tiny perturbation that differs on every run (a call counter
    read at run time, like an uninitialized or racy accumulator would be)."""
    out = tiny_attention(q, k, v, q_seg, kv_seg, **kwargs)
    calls = jax.experimental.io_callback(_tick, jax.ShapeDtypeStruct((), jnp.float32))
    return out * (1.0 + 1e-5 * calls)


def nan_for_large_logits(q, k, v, q_seg, kv_seg, **kwargs):
    """Planted bug: unstabilized softmax (exp without the max) in disguise: NaN once
    logits are large."""
    out = tiny_attention(q, k, v, q_seg, kv_seg, **kwargs)
    return jnp.where(jnp.abs(q).max() > 2.0, jnp.nan, out)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToyAttentionCase(Case):
    """Heads, lengths, a causal flag, segment runs ``((id, length), ...)`` and block_q."""

    heads: int = 1
    q_len: int = 256
    kv_len: int = 256
    causal: bool = False
    segments: tuple[tuple[int, int], ...] | None = None
    block_q: int = 128

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.q_len % self.block_q:
            raise ValueError("block_q must divide q_len")
        if self.segments is not None and sum(n for _, n in self.segments) != self.q_len:
            raise ValueError("segment runs must cover q_len")
        if self.segments is not None and self.q_len != self.kv_len:
            raise ValueError("segments need q_len == kv_len")

    def seg_ids(self) -> np.ndarray:
        if self.segments is None:
            return np.zeros((1, self.q_len), np.int32)
        return np.concatenate([np.full(n, i, np.int32) for i, n in self.segments])[None]

    def materialize(self) -> dict[str, np.ndarray]:
        shape_q, shape_k = (self.heads, self.q_len, D), (self.heads, self.kv_len, D)
        ids = self.seg_ids()
        return {
            "q": standard_normal(self.rng(0), shape_q, self.dtype) / np.float32(np.sqrt(D)),
            "k": standard_normal(self.rng(1), shape_k, self.dtype),
            "v": standard_normal(self.rng(2), shape_k, self.dtype),
            "q_seg": ids,
            "kv_seg": ids if self.segments is not None else np.zeros((1, self.kv_len), np.int32),
        }


def visible(case: ToyAttentionCase) -> np.ndarray:
    qs = case.seg_ids()[0]
    ks = qs if case.segments is not None else np.zeros(case.kv_len, np.int32)
    allowed = qs[:, None] == ks[None, :]
    if case.causal:
        allowed &= np.arange(case.kv_len)[None, :] <= np.arange(case.q_len)[:, None]
    return allowed[None, None]


@functools.lru_cache(maxsize=64)
def _program(impl, case: ToyAttentionCase, backend: Backend):
    fn = functools.partial(impl, block_q=case.block_q, causal=case.causal,
                           interpret=backend.pallas_interpret())
    return jax.jit(lambda inputs: {"out": fn(inputs["q"], inputs["k"], inputs["v"],
                                             inputs["q_seg"], inputs["kv_seg"])})


def _run(impl, case, inputs, backend):
    out = _program(impl, dataclasses.replace(case, seed=0), backend)(inputs)
    return {"out": np.asarray(out["out"], np.float32)}


def _reference(case, inputs):
    q, k, v = (np.asarray(inputs[n], np.float64) for n in ("q", "k", "v"))
    allowed = visible(case)[0]
    s = np.where(allowed, np.einsum("hqd,hkd->hqk", q, k), -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    p = np.where(allowed, np.exp(s - np.where(np.isfinite(m), m, 0)), 0.0)
    denom = np.maximum(p.sum(-1, keepdims=True), 1e-300)
    return {"out": np.einsum("hqk,hkd->hqd", p, v) / denom}


@st.composite
def toy_attention_cases(draw) -> ToyAttentionCase:
    """Small cases; half with segments (2-4 runs), half causal."""
    n = 256
    segments = None
    if draw(st.booleans()):
        cuts = sorted(draw(st.lists(st.integers(1, n - 1), min_size=1, max_size=3, unique=True)))
        bounds = [0, *cuts, n]
        segments = tuple((i, b - a) for i, (a, b) in enumerate(zip(bounds, bounds[1:],
                                                                     strict=False)))
    return ToyAttentionCase(dtype="float32", seed=draw(st.integers(0, 1000)),
                            heads=draw(st.sampled_from([1, 2])), q_len=n, kv_len=n,
                            causal=draw(st.booleans()), segments=segments,
                            block_q=draw(st.sampled_from([128, 256])))


def _block_variants(case):
    return st.sampled_from([128, 256]).map(lambda b: dataclasses.replace(case, block_q=b))


def _toggles(case):
    out = []
    if case.causal:
        out.append(Toggle(name="causal", case=dataclasses.replace(case, causal=False)))
    if case.segments is not None:
        out.append(Toggle(name="segments", case=dataclasses.replace(case, segments=None)))
    return out


def _traceable(impl, case, backend):
    return _program(impl or tiny_attention, dataclasses.replace(case, seed=0), backend)


def _segments(case):
    if case.segments is None:
        return None
    return case.seg_ids(), case.seg_ids()


HOOKS = Metamorphic(
    roles={"q": ("head", "query", "dim"), "k": ("head", "key", "dim"),
           "v": ("head", "key", "dim"), "q_seg": (None, "query"), "kv_seg": (None, "key")},
    visible=visible,
    segments=_segments,
    block_variants=_block_variants,
    option_toggles=_toggles,
    traceable=_traceable,
    local_case=lambda case, mesh: (dataclasses.replace(case, heads=case.heads // mesh["head"])
                                   if case.heads % mesh.get("head", 1) == 0
                                   and mesh.get("batch", 1) == 1 else None),
)

TOY_ATTENTION = Family(
    name="toy-attention",
    summary="a tiny Pallas segment/causal attention kernel of the harness's own tests",
    case_type=ToyAttentionCase,
    cases=toy_attention_cases,
    kernel=tiny_attention,
    impl_signature="f(q, k, v, q_seg, kv_seg, *, block_q, causal, interpret) -> out",
    run=_run,
    reference=_reference,
    output_axes={"out": ("head", "query", "dim")},
    tolerances=ToleranceTable({("float32", "out"): Tolerance(max_rel_err=1e-4, slice_floor=F32)}),
    capabilities=frozenset({"causal", "segments"}),
    backends=frozenset({"interpret", "tpu-interpret"}),
    metamorphic=HOOKS,
)


# --- kernels for the TPU interpret diagnostics ---------------------------------------------------


def _copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def racy_copy(x, *, interpret):
    """Planted race: a 'parallel' grid axis whose steps all write output block 0, so the
    two simulated cores write it concurrently."""
    return pl.pallas_call(
        _copy_kernel, grid=(x.shape[0] // 8,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((8, 128), x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
        interpret=interpret,
    )(x)


def _sum_kernel(x_ref, o_ref, acc_ref, *, init: bool):
    if init:
        @pl.when(pl.program_id(1) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += x_ref[...]

    @pl.when(pl.program_id(1) == pl.num_programs(1) - 1)
    def _():
        o_ref[...] = acc_ref[...]


def row_block_sum(x, *, interpret, init: bool = True):
    """Sums the 4 row blocks of each of 2 groups; ``init=False`` is the planted bug of
    an accumulator scratch that is read before it is ever written."""
    return pl.pallas_call(
        functools.partial(_sum_kernel, init=init), grid=(2, 4),
        in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i * 4 + j, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((16, 128), x.dtype),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=interpret,
    )(x)


def head_count_baked_in(q, k, v, q_seg, kv_seg, **kwargs):
    """Planted sharding bug: the math assumes the two heads of the unsharded problem
    (right unsharded; wrong on a shard that holds one head)."""
    return tiny_attention(q, k, v, q_seg, kv_seg, **kwargs) * (q.shape[0] / 2)
