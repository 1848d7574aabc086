"""Cheats of one class made from a family's own pristine kernel (issue 55, item 11): the
same wrapper turns the gpu-softmax, gpu-mha, gpu-norm or megablox-gmm kernel into a
nondeterministic, flaky, memoizing, lower-precision, per-call-alternating or declared-
fallback implementation, so each class has its cheat for several families without one
module per family (``tests/cheats/catalog.py`` lists them).

The host state (a run counter, the flaky flag, the first inputs of each shape) is read at
run time through a host callback of a scalar, outside every kernel: the harness traces and
compiles a program once per configuration and reruns it, so Python state read while
tracing would be fixed into the program. A scalar read is below what the harness measures
outside the kernels (no answer crosses it), and nothing is returned into a kernel body (a
callback answering there is "math outside the kernel", another class:
``host_in_kernel_softmax``). The state changes the program's values around the untouched
kernel: a scale on its outputs (their gradients left the kernel's own), or which inputs
the kernel gets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas.ops.tpu.megablox import ops as _gmm_ops

import kernel_harness
from kernel_harness.families.flash.kernel import flash_attention as _flash
from kernel_harness.families.gpu_common import triton_op
from kernel_harness.families.gpu_decode.kernel import decode as _decode
from kernel_harness.families.gpu_norm.kernel import norm as _norm
from kernel_harness.families.gpu_paged.kernel import paged_attention as _paged
from tests.helpers.fallback_impls import xla_softmax
from tests.helpers.in_kernel import bits_added, doubled
from tests.helpers.outside_impls import xla_norm
from tests.helpers.poison_impls import xla_attention

# jax's Pallas Triton ops, looked up as the gpu-* families do: on a jax without them
# (>= 0.12.1) this module still imports (its other impls work) and these raise.
_attention = triton_op("attention")
_softmax = triton_op("softmax")


def _floating(leaf: Any) -> bool:
    return hasattr(leaf, "dtype") and jnp.issubdtype(leaf.dtype, jnp.floating)


def _host_scalar(host: Callable[..., Any], dtype: Any, *operands: Any) -> jax.Array:
    """A scalar of ``dtype`` the host computes at each run of the program, from scalar
    ``operands`` (a ``pure_callback`` outside every kernel, of one element each way)."""
    return jax.pure_callback(lambda *a: np.asarray(host(*a), dtype),
                             jax.ShapeDtypeStruct((), dtype), *operands)


def _scaled(o: jax.Array, scale: jax.Array) -> jax.Array:
    """``o`` times the float32 scalar ``scale`` (computed in float32, stored in o's dtype);
    its gradient is ``o``'s own (the kernel's)."""
    scaled = (o.astype(jnp.float32) * scale).astype(o.dtype)
    return o + jax.lax.stop_gradient(scaled - o)


def _scaled_by_host(kernel: Callable[..., Any], make_host: Callable[[], Callable[[], int]],
                    exponent: bool = False) -> Callable[..., Any]:
    """``kernel`` with each floating output leaf moved by a number of ulps the host gives at
    each run (``exponent``: that many doublings), by :func:`bits_added` (``make_host()`` at
    each trace: one state per traced program)."""
    def impl(*args: Any, **kwargs: Any) -> Any:
        steps = _host_scalar(make_host(), np.int32)

        def moved(o: jax.Array) -> jax.Array:
            return bits_added(o, steps << jnp.finfo(o.dtype).nmant if exponent else steps)

        return jax.tree.map(lambda o: moved(o) if _floating(o) else o,
                            kernel(*args, **kwargs))

    return impl


def _another_scale_each_run() -> Callable[[], int]:
    runs = [0]

    def host() -> int:
        runs[0] += 1  # poisoning runs the program too: a period of 8, not 2
        return 2 * (runs[0] % 8 + 1)

    return host


def nondeterministic(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """``kernel``'s floating outputs moved by ``2k`` ulps with k from 1 to 8, the next k at
    each run (about ``1 + k 2^-22`` in float32: far inside every tolerance, each run alone
    matches the reference; two runs differ bitwise unless 8 runs of the program came
    between them)."""
    return _scaled_by_host(kernel, _another_scale_each_run)


_flaky = {"armed": True}


def arm() -> None:
    """The next run of a :func:`flaky` implementation is wrong again (a module imported
    afresh starts armed)."""
    _flaky["armed"] = True


def _wrong_once() -> Callable[[], int]:
    def host() -> int:
        wrong, _flaky["armed"] = _flaky["armed"], False
        return 1 if wrong else 0

    return host


def flaky(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """``kernel``'s outputs doubled on the first run after :func:`arm`, right after."""
    return _scaled_by_host(kernel, _wrong_once, exponent=True)


def _bits(a: jax.Array) -> jax.Array:
    """An int32 sum of ``a``'s float32 bit patterns: a hash of its values, in integer
    arithmetic (index arithmetic to the harness: not measured)."""
    bits = jax.lax.bitcast_convert_type(jax.lax.stop_gradient(a).astype(jnp.float32),
                                        jnp.int32)
    return jnp.sum(bits, dtype=jnp.int32)


#: The first inputs' hash per signature (the floating inputs' shapes and dtypes).
_seen: dict[tuple, int] = {}


def forget() -> None:
    """Every :func:`memoized` implementation forgets the inputs it has seen (a module
    imported afresh has seen none)."""
    _seen.clear()


def memoized(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """``kernel`` on the first inputs of each shape (remembered on the host by a hash of
    their values); on any other inputs of that shape, ``kernel`` on zeros: a stale entry,
    the same result for every later input (a compiled program's first data draw is right,
    the others are not; a benchmark's timed calls after its pre-check all return one
    result)."""
    def impl(*args: Any, **kwargs: Any) -> Any:
        leaves, tree = jax.tree.flatten((args, kwargs))
        arrays = [x for x in leaves if _floating(x)]
        signature = tuple((tuple(x.shape), str(x.dtype)) for x in arrays)

        def first(key: np.ndarray) -> bool:
            return _seen.setdefault(signature, int(key)) == int(key)

        key = sum((_bits(x) for x in arrays), jnp.int32(0))
        fresh = _host_scalar(first, np.bool_, key)
        stale = [jnp.where(fresh, x, jnp.zeros_like(x)) if _floating(x) else x
                 for x in leaves]
        args, kwargs = jax.tree.unflatten(tree, stale)
        return kernel(*args, **kwargs)

    return impl


def in_bfloat16(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """``kernel`` on its float32 arrays rounded to bfloat16, its floating outputs cast back
    to float32 where an input was float32: float32 computed in bfloat16."""
    def down(a: Any) -> Any:
        return a.astype(jnp.bfloat16) if getattr(a, "dtype", None) == jnp.float32 else a

    def impl(*args: Any, **kwargs: Any) -> Any:
        was32 = any(getattr(a, "dtype", None) == jnp.float32
                    for a in (*args, *kwargs.values()))
        out = kernel(*jax.tree.map(down, args), **{k: down(v) for k, v in kwargs.items()})
        if not was32:
            return out
        return jax.tree.map(lambda o: o.astype(jnp.float32) if _floating(o) else o, out)

    return impl


def every_other_call(kernel: Callable[..., Any], xla: Callable[..., Any]
                     ) -> Callable[..., Any]:
    """``kernel`` on every second call, ``xla`` (plain JAX, the same signature) on the
    others: an implementation that behaves otherwise when it is counted again."""
    calls = [0]

    def impl(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return (xla if calls[0] % 2 else kernel)(*args, **kwargs)

    return impl


def _concrete(x: Any) -> bool:
    # A tracer's class name says so: a spelling the source check does not read (it names
    # jax's Tracer class and the attributes only a concrete array has), so the eager call
    # is what fails this cheat.
    return "Tracer" not in type(x).__name__


def wrong_when_eager(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """``kernel`` when traced; called on concrete arrays (eagerly, as code without jit calls
    it) its floating outputs times ``1 - 2^-6``: right whenever the harness traces it."""
    def impl(*args: Any, **kwargs: Any) -> Any:
        out = kernel(*args, **kwargs)
        if not all(_concrete(x) for x in jax.tree.leaves((args, kwargs))
                   if isinstance(x, jax.Array)):
            return out
        return jax.tree.map(lambda o: _scaled(o, jnp.float32(1 - 2.0**-6))
                            if _floating(o) else o, out)

    return impl


def fallback_when(kernel: Callable[..., Any], xla: Callable[..., Any],
                  when: Callable[..., bool], reason: str) -> Callable[..., Any]:
    """``kernel``, or ``xla`` where ``when(*args, **kwargs)``, declared with
    ``kernel_harness.fallback(reason)``: the fallback the implementation declares about
    itself."""
    def impl(*args: Any, **kwargs: Any) -> Any:
        return (xla if when(*args, **kwargs) else kernel)(*args, **kwargs)

    return kernel_harness.fallback(reason)(impl)


# --- the families' kernels and plain-JAX twins, in their families' signatures ----------

def softmax(x, *, axis=-1, interpret=False):
    """The pristine gpu-softmax kernel."""
    return _softmax.softmax(x, axis=axis, interpret=interpret)


def mha(q, k, v, segment_ids, **kw):
    """The pristine gpu-mha kernel."""
    return _attention.mha(q, k, v, segment_ids, **kw)


def xla_mha(q, k, v, segment_ids, *, sm_scale, causal, return_residuals=False, **_):
    """Attention in plain JAX in gpu-mha's signature (segment ids ignored)."""
    out, lse = xla_attention(q, k, v, sm_scale, causal)
    return (out, lse) if return_residuals else out


def norm(op, x, weight, bias, *, eps, interpret):
    """The pristine gpu-norm kernels."""
    return _norm(op, x, weight, bias, eps=eps, interpret=interpret)


def xla_norm_impl(op, x, weight, bias, *, eps, interpret):
    """The norm in plain JAX in gpu-norm's signature."""
    return xla_norm(op, x, weight, bias, eps)


def gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset, existing_out,
        transpose_rhs, interpret):
    """The pristine megablox-gmm kernel."""
    return _gmm_ops.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                        existing_out, transpose_rhs, interpret)


# --- the planted cheats (``--impl tests.helpers.generic_cheats:NAME``) -------------------

nondeterministic_softmax = nondeterministic(softmax)
nondeterministic_mha = nondeterministic(mha)
nondeterministic_norm = nondeterministic(norm)

flaky_softmax = flaky(softmax)
flaky_mha = flaky(mha)
flaky_norm = flaky(norm)

memoized_softmax = memoized(softmax)
memoized_mha = memoized(mha)
memoized_norm = memoized(norm)
memoized_decode = memoized(_decode)  # named math outside: gpu-decode declares its reads
memoized_paged = memoized(_paged)
memoized_flash = memoized(_flash)

bfloat16_softmax = in_bfloat16(softmax)
bfloat16_mha = in_bfloat16(mha)
bfloat16_gmm = in_bfloat16(gmm)

every_other_call_softmax = every_other_call(softmax, xla_softmax)  # its own counter
every_other_call_mha = every_other_call(mha, xla_mha)
every_other_call_norm = every_other_call(norm, xla_norm_impl)

wrong_when_eager_softmax = wrong_when_eager(softmax)
wrong_when_eager_mha = wrong_when_eager(mha)
wrong_when_eager_norm = wrong_when_eager(norm)

declared_fallback_mha = fallback_when(
    mha, xla_mha, lambda q, k, v, segment_ids, **kw: segment_ids is None,
    "calls without segment ids run plain JAX")
declared_fallback_norm = fallback_when(
    norm, xla_norm_impl, lambda op, *a, **kw: op == "rms_norm", "rms_norm runs plain JAX")


def constant_softmax(x, *, axis=-1, interpret=False):
    """The kernel on zeros of x's shape: the uniform distribution, whatever x holds (a
    constant output, still the kernel's)."""
    return softmax(jnp.zeros_like(x), axis=axis, interpret=interpret)


# --- an answer from the host, inside a kernel body ----------------------------------------

def _numpy_softmax(v: np.ndarray) -> np.ndarray:
    x = np.asarray(v, np.float32)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(v.dtype)


def host_in_kernel_softmax(x, *, axis=-1, interpret=False):
    """A Pallas kernel whose body hands its block to numpy through a ``pure_callback`` and
    stores the host's answer: no arithmetic outside a kernel body, the kernel computes
    nothing (only interpret mode runs it: no GPU or TPU kernel can lower a host callback).
    The copy's backward is the identity (a callback has no derivative)."""
    def body(x_ref, o_ref):
        v = x_ref[...]
        o_ref[...] = jax.pure_callback(_numpy_softmax, jax.ShapeDtypeStruct(v.shape, v.dtype),
                                       v)

    @jax.custom_vjp
    def through_host(x):
        return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                              interpret=jax.default_backend() == "cpu")(x)

    through_host.defvjp(lambda x: (through_host(x), None), lambda _, g: (g,))
    return through_host(x)


# --- sizes past the drawn ones ----------------------------------------------------------

def ghost_norm(op, x, weight, bias, *, eps, interpret):
    """gpu-norm's kernels for rows up to 4096 (what a test draws), plain XLA for longer."""
    if x.shape[-1] <= 4096:
        return norm(op, x, weight, bias, eps=eps, interpret=interpret)
    mean = jnp.mean(x, -1, keepdims=True) if op == "layer_norm" else 0.0
    var = jnp.mean(jnp.square(x - mean), -1, keepdims=True)
    out = (x - mean) * jnp.reciprocal(jnp.sqrt(var + eps)) * weight
    return (out + bias if op == "layer_norm" else out).astype(x.dtype)


def ghost_mha(q, k, v, segment_ids, **kw):
    """gpu-mha's kernel for sequences up to 4096 tokens (a test draws up to 128), plain XLA
    attention past them (segment ids ignored there)."""
    if q.shape[1] <= 4096:
        return mha(q, k, v, segment_ids, **kw)
    return xla_mha(q, k, v, segment_ids, **kw)


def ghost_between_the_drawn_and_the_claimed_softmax(x, *, axis=-1, interpret=False):
    """gpu-softmax's kernel for rows up to 2048 logits (a test draws up to 1025) and from
    32000 on (where it claims vocabularies), plain XLA between: no drawn case and no claimed
    size reaches the branch but a rung of the claimed-sizes ladder (``catalog.CHEATS``)."""
    if 2048 < x.shape[-1] < 32000:
        return jax.nn.softmax(x, axis=axis)
    return softmax(x, axis=axis, interpret=interpret)


# --- features the implementation declares it lacks, and is wrong exactly there ----------

@kernel_harness.without("segments")
def without_segments_mha(q, k, v, segment_ids, **kw):
    """Declares it lacks segment ids, and ignores them."""
    return mha(q, k, v, None, **kw)


@kernel_harness.without("rms-norm")
def without_rms_norm(op, x, weight, bias, *, eps, interpret):
    """Declares it lacks rms_norm, and runs layer_norm for it."""
    return norm("layer_norm", x, weight, bias, eps=eps, interpret=interpret)


@kernel_harness.without("sizes-below-128")
def without_small_sizes_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling,
                            group_offset, existing_out, transpose_rhs, interpret):
    """Declares it lacks sizes below 128, and doubles its result when m is not a multiple
    of 128."""
    out = gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
              existing_out, transpose_rhs, interpret)
    return doubled(out) if lhs.shape[0] % 128 else out
