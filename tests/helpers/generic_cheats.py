"""Cheats of one class made from a family's own pristine kernel (issue 55, item 11): the
same wrapper turns the gpu-softmax, gpu-mha, gpu-norm or megablox-gmm kernel into a
nondeterministic, flaky, memoizing, lower-precision, per-call-alternating or declared-
fallback implementation, so each class has its cheat for several families without one
module per family (``tests/cheats/catalog.py`` lists them).

The host state (a run counter, a memo, the flaky flag) is read by a host callback inside
a Pallas kernel body (a copy kernel applied to each floating output), at run time: the
harness traces and compiles a program once per configuration and reruns it, so Python
state read while tracing would be fixed into the program; and a callback outside every
kernel is "math outside the kernel" (another class). The copy kernels' backward is the
identity (a callback has no derivative), so the gradients are the kernel's own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas.ops.gpu import attention as _attention
from jax.experimental.pallas.ops.gpu import softmax as _softmax
from jax.experimental.pallas.ops.tpu.megablox import ops as _gmm_ops

import kernel_harness
from kernel_harness.families.gpu_decode.kernel import decode as _decode
from kernel_harness.families.gpu_norm.kernel import norm as _norm
from tests.helpers.fallback_impls import xla_softmax
from tests.helpers.outside_impls import xla_norm
from tests.helpers.poison_impls import xla_attention

Host = Callable[[np.ndarray], np.ndarray]


def _through_host(x: jax.Array, host: Host) -> jax.Array:
    """``x`` copied by a Pallas kernel whose body hands it to ``host`` (a host callback
    inside the kernel: no math outside any kernel); the gradient passes unchanged."""
    def body(x_ref, o_ref):
        v = x_ref[...]
        o_ref[...] = jax.pure_callback(host, jax.ShapeDtypeStruct(v.shape, v.dtype), v)

    @jax.custom_vjp
    def copy(x):
        interpret = jax.default_backend() == "cpu"
        return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                              interpret=interpret)(x)

    copy.defvjp(lambda x: (copy(x), None), lambda _, g: (g,))
    return copy(x)


def _floating(leaf: Any) -> bool:
    return hasattr(leaf, "dtype") and jnp.issubdtype(leaf.dtype, jnp.floating)


def _via_host(kernel: Callable[..., Any], make_host: Callable[[], Host]) -> Callable[..., Any]:
    """``kernel`` with each floating output leaf passed through a host callback of its own
    (``make_host()`` at each trace: one state per leaf of each traced program)."""
    def impl(*args: Any, **kwargs: Any) -> Any:
        return jax.tree.map(lambda o: _through_host(o, make_host()) if _floating(o) else o,
                            kernel(*args, **kwargs))

    return impl


def _another_scale_each_run() -> Host:
    runs = [0]

    def host(v: np.ndarray) -> np.ndarray:
        runs[0] += 1  # a program may call one leaf's callback more than once per run
        scale = 1.0 + 2.0**-21 * (runs[0] % 5 + 1)
        return (np.asarray(v, np.float32) * scale).astype(v.dtype)

    return host


def nondeterministic(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """``kernel``'s float32 outputs times ``1 + k 2^-21`` with k from 1 to 5, another at
    each call (far inside every tolerance: each run alone matches the reference; two runs
    differ bitwise unless a run makes a multiple of 5 calls)."""
    return _via_host(kernel, _another_scale_each_run)


_flaky = {"armed": True}


def arm() -> None:
    """The next run of a :func:`flaky` implementation is wrong again (a module imported
    afresh starts armed)."""
    _flaky["armed"] = True


def _wrong_once() -> Host:
    def host(v: np.ndarray) -> np.ndarray:
        wrong, _flaky["armed"] = _flaky["armed"], False
        return (np.asarray(v, np.float32) * (2.0 if wrong else 1.0)).astype(v.dtype)

    return host


def flaky(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """``kernel``'s outputs doubled on the first run after :func:`arm`, right after."""
    return _via_host(kernel, _wrong_once)


def _first_result() -> Host:
    memo: dict[tuple, np.ndarray] = {}

    def host(v: np.ndarray) -> np.ndarray:
        return memo.setdefault((v.shape, str(v.dtype)), np.array(v))

    return host


def memoized(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """``kernel``'s first result per output shape, returned again for every later input
    of that shape (a compiled program's first data draw is right, the others are not)."""
    return _via_host(kernel, _first_result)


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
memoized_decode = memoized(_decode)  # a ``bench`` cheat: gpu-decode has a benchmark

bfloat16_softmax = in_bfloat16(softmax)
bfloat16_mha = in_bfloat16(mha)
bfloat16_gmm = in_bfloat16(gmm)

every_other_call_softmax = every_other_call(softmax, xla_softmax)  # its own counter
every_other_call_mha = every_other_call(mha, xla_mha)
every_other_call_norm = every_other_call(norm, xla_norm_impl)

declared_fallback_mha = fallback_when(
    mha, xla_mha, lambda q, k, v, segment_ids, **kw: segment_ids is None,
    "calls without segment ids run plain JAX")
declared_fallback_norm = fallback_when(
    norm, xla_norm_impl, lambda op, *a, **kw: op == "rms_norm", "rms_norm runs plain JAX")


def constant_softmax(x, *, axis=-1, interpret=False):
    """The kernel on zeros of x's shape: the uniform distribution, whatever x holds (a
    constant output, still the kernel's)."""
    return softmax(jnp.zeros_like(x), axis=axis, interpret=interpret)


# --- what still gets through (``catalog.HOLES``) ----------------------------------------

def _numpy_softmax(v: np.ndarray) -> np.ndarray:
    x = np.asarray(v, np.float32)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(v.dtype)


def host_in_kernel_softmax(x, *, axis=-1, interpret=False):
    """A Pallas kernel whose body hands its block to numpy through a ``pure_callback``:
    the answer is the host's, and no arithmetic is measured outside a kernel body (only
    interpret mode runs it: no GPU or TPU kernel can lower a host callback)."""
    return _through_host(x, _numpy_softmax)


# --- values the old menus never drew -----------------------------------------------------

def zero_after_a_masked_block(x, *, axis=-1, interpret=False):
    """The gpu-softmax kernel, zeros in every row whose whole first 128-lane block is -inf
    (a blockwise softmax whose running sum starts from a dead block); only a masked
    prefix of 128 or more shows it. Zeros, not NaN: a case whose every row is dead would
    then be all NaN, which poisoning names first (no kernel writes it)."""
    out = softmax(x, axis=axis, interpret=interpret)
    if x.shape[-1] <= 128:
        return out
    dead = jnp.all(jnp.isneginf(x[..., :128]), axis=-1, keepdims=True)
    return jnp.where(dead, jnp.zeros_like(out), out)


def nan_at_length_1_segments(q, k, v, segment_ids, *, return_residuals=False, **kw):
    """The gpu-mha kernel, NaN at every query alone in its segment run (its neighbours'
    ids differ): only a segment of length 1 shows it."""
    res = mha(q, k, v, segment_ids, return_residuals=return_residuals, **kw)
    if segment_ids is None or q.shape[1] != k.shape[1]:
        return res
    s = segment_ids
    left = jnp.pad(s[:, :-1], ((0, 0), (1, 0)), constant_values=-1)
    right = jnp.pad(s[:, 1:], ((0, 0), (0, 1)), constant_values=-1)
    alone = (s != left) & (s != right)  # [batch, len]
    out = res[0] if return_residuals else res
    out = jnp.where(alone[:, :, None, None], jnp.nan, out)
    if not return_residuals:
        return out
    return out, jnp.where(alone[:, None, :], jnp.nan, res[1])


def doubled_at_offset_rows(op, x, weight, bias, *, eps, interpret):
    """The gpu-norm kernels, doubled in every row of 16 or more values of one sign (a mean
    offset by many spreads: a norm that loses such rows to cancellation)."""
    out = norm(op, x, weight, bias, eps=eps, interpret=interpret)
    if x.shape[-1] < 16:
        return out
    one_sign = jnp.all(x > 0, axis=-1, keepdims=True) | jnp.all(x < 0, axis=-1, keepdims=True)
    return jnp.where(one_sign, 2 * out, out)


# --- sizes past the drawn ones ----------------------------------------------------------

def ghost_norm(op, x, weight, bias, *, eps, interpret):
    """gpu-norm's kernels for rows up to 4096 (what a test draws), plain XLA for longer."""
    if x.shape[-1] <= 4096:
        return norm(op, x, weight, bias, eps=eps, interpret=interpret)
    mean = jnp.mean(x, -1, keepdims=True) if op == "layer_norm" else 0.0
    var = jnp.mean(jnp.square(x - mean), -1, keepdims=True)
    out = (x - mean) * jnp.reciprocal(jnp.sqrt(var + eps)) * weight
    return (out + bias if op == "layer_norm" else out).astype(x.dtype)


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
    return out * 2 if lhs.shape[0] % 128 else out
