"""Every attention family's reference as one program: how the kernel defines softmax
attention (:class:`Definition`, data; the family's prose promise is ``Family.contract``)
plus a case's arrays in the op's vocabulary (:class:`AttentionCall`).

A family maps its case onto an :class:`AttentionCall` (its names, its layout, its dense
visibility from the case description) and gets its reference and low-precision twin from
:func:`references`; the forward, the ``jax.vjp`` of it, the log-sum-exp output and the
magnitudes of summed gradient terms are written here once, for every kernel.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.ops.attention.designs import (
    DESIGNS,
    flash_attend,
    jax_flash_attend,
    unmodelled,
)
from kernel_harness.ops.attention.reference import (
    HIGHEST,
    NORMALIZE,
    attend,
    logits,
    softmax_weights,
)
from kernel_harness.ops.attention.vocabulary import LAYOUTS, heads_first

#: The log-sum-exp bases a kernel may return (``natural``; ``base2``: flash-style kernels
#: that keep ``log2`` of the denominator as their residual).
LSE_BASES: tuple[str, ...] = ("natural", "base2")
#: Gradients whose rounding error follows the size of the terms summed into them rather
#: than their own (see :func:`gradient_magnitudes`).
MAGNITUDES: tuple[str, ...] = ("dq", "dk", "dbias", "dsinks")
#: The differentiable arrays of a call, in the order of their gradients.
DIFFERENTIABLE = ("q", "k", "v", "bias", "sinks")
_CPU_OPTIONS = {"xla_backend_optimization_level": 0}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Definition:
    """How one kernel's softmax attention is defined, as options of the one op.

    ``layout`` (:data:`~.vocabulary.LAYOUTS`); logits ``scale * q.k^T + bias`` (``(q.k^T +
    bias) * scale`` with ``bias_before_scale``), capped as ``soft_cap * tanh(s / soft_cap)``;
    ``normalize`` (:data:`~.reference.NORMALIZE`) where the denominator divides; ``lse``:
    the log-sum-exp as an output, in that base (:data:`LSE_BASES`), or None; ``magnitudes``
    the gradients (:data:`MAGNITUDES`) whose summed-term sizes are outputs too
    (``"<grad>:magnitude"``); ``design`` (:data:`~.designs.DESIGNS`) where the kernel rounds,
    which its low-precision twin models (never the float32 reference); ``kv_block``: how many
    keys the kernel's forward takes a step (None: all; read by the ``jax-flash`` design
    only: fewer than all is an online softmax, rounding other probabilities).
    """

    layout: str
    scale: float = 1.0
    bias_before_scale: bool = False
    soft_cap: float | None = None
    normalize: str = "probs"
    lse: str | None = None
    magnitudes: tuple[str, ...] = ()
    design: str = "plain"
    kv_block: int | None = None

    def __post_init__(self) -> None:
        for name, value, known in (("layout", self.layout, LAYOUTS),
                                   ("normalize", self.normalize, NORMALIZE),
                                   ("lse", self.lse, (None, *LSE_BASES)),
                                   ("design", self.design, DESIGNS)):
            if value not in known:
                raise ValueError(f"Definition.{name} must be one of {known}, got {value!r}")
        unknown = set(self.magnitudes) - set(MAGNITUDES)
        if unknown:
            raise ValueError(f"Definition.magnitudes: unknown {sorted(unknown)}; known "
                             f"{MAGNITUDES}")

    def attend_source(self, *, bias: str = "None", sinks: str = "None") -> str:
        """This contract's :func:`~.reference.attend` call as source text, on a script's
        names ``q``, ``k``, ``v``, ``vis`` (and ``bias``/``sinks`` as given): what an
        exported script computes, from the same fact as the reference."""
        return (f"attend(q, k, v, vis, {self.scale!r}, layout={self.layout!r}, bias={bias}, "
                f"bias_before_scale={self.bias_before_scale!r}, soft_cap={self.soft_cap!r}, "
                f"sinks={sinks}, normalize={self.normalize!r}, precision=HI)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class AttentionCall:
    """One case in the op's vocabulary: q, k, v in the contract's layout, ``vis`` (bool,
    broadcastable to ``[batch, q_heads, q_len, kv_len]``, from the case description), and
    optionally the output cotangent ``do`` (None: forward only), an additive ``bias`` and
    per-head ``sinks``. ``names`` renames the op's outputs (``out``, ``lse``, ``dq``, ``dk``,
    ``dv``, ``dbias``, ``dsinks``, ``<grad>:magnitude``) to the family's; ``absent`` gives
    family outputs that are float32 zeros of the given shape (a gradient of an input the
    case does not have)."""

    definition: Definition
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    vis: Any
    do: np.ndarray | None = None
    bias: np.ndarray | None = None
    sinks: np.ndarray | None = None
    names: Mapping[str, str] = dataclasses.field(default_factory=dict)
    absent: Mapping[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)

    def arrays(self) -> dict[str, np.ndarray]:
        """The call's arrays by their op names (those present)."""
        return {n: a for n in (*DIFFERENTIABLE, "do")
                if (a := getattr(self, n)) is not None}


def gradient_magnitudes(c: Definition, x: Mapping[str, jax.Array], vis: jax.Array,
                        out: jax.Array, lse: jax.Array, precision: Any) -> dict[str, jax.Array]:
    """The size of the terms summed into the gradients ``c.magnitudes`` names.

    ``dS = P * (dP - D)`` cancels: a key only one query sees (or a query that sees one key)
    has ``dS = 0`` exactly, so its ``dk`` (``dq``) row is 0 in the reference, while a
    low-precision kernel's rounding of ``D`` leaves ``~eps * |dP|`` there; each row is
    judged against ``scale * sum P (|dP| + |D|) |q|`` (``|k|``) instead of its own zero.
    The bias gradient is ``dS`` itself (times the scale when the bias comes before it),
    summed over the axes a shared bias broadcasts along: its scale is ``P (|dP| + |D|)``
    summed the same way (a float32 row at 16x logits cancels to ~1e-5 of its terms).
    ``dsinks = -sum over rows of p_sink * (do . out)`` can cancel hundreds of times over:
    its scale is ``sum |p_sink * (do . out)|``. (The soft cap's derivative, at most 1, is
    left out: the magnitude stays an upper bound.)
    """
    q, k, v, do = (heads_first(x[n], c.layout) for n in ("q", "k", "v", "do"))
    group = q.shape[1] // k.shape[1]
    k, v = (jnp.repeat(a, group, axis=1) for a in (k, v))
    d = jnp.sum(do * heads_first(out, c.layout), axis=-1)  # [b, h, q]
    res: dict[str, jax.Array] = {}
    if {"dq", "dk", "dbias"} & set(c.magnitudes):
        s = logits(q, k, c.scale, layout="bhqd", bias=x.get("bias"),
                   bias_before_scale=c.bias_before_scale, soft_cap=c.soft_cap,
                   precision=precision)
        weights, denom, _ = softmax_weights(s, vis, x.get("sinks"))
        p = weights / jnp.where(denom > 0, denom, 1.0)
        dp = jnp.einsum("bhqd,bhkd->bhqk", do, v, precision=precision)
        ds = p * (jnp.abs(dp) + jnp.abs(d)[..., None])  # |dS|'s terms, [b, h, q, k]
        terms = ds * c.scale
        if "dq" in c.magnitudes:
            dq = jnp.einsum("bhqk,bhkd->bhqd", terms, jnp.abs(k), precision=precision)
            res["dq:magnitude"] = heads_first(dq, c.layout)
        if "dk" in c.magnitudes:
            dk = jnp.einsum("bhqk,bhqd->bhkd", terms, jnp.abs(q), precision=precision)
            b, h, n, e = dk.shape
            dk = dk.reshape(b, h // group, group, n, e).sum(axis=2)
            res["dk:magnitude"] = heads_first(dk, c.layout)
        if "dbias" in c.magnitudes:
            dbias = terms if c.bias_before_scale else ds
            shared = tuple(i for i, (n_bias, n_full) in enumerate(
                zip(x["bias"].shape, dbias.shape, strict=True)) if n_bias == 1 < n_full)
            res["dbias:magnitude"] = jnp.sum(dbias, axis=shared, keepdims=True)
    if "dsinks" in c.magnitudes:
        p_sink = jnp.exp(x["sinks"][None, :, None] - lse)
        res["dsinks:magnitude"] = jnp.sum(jnp.abs(p_sink * d), axis=(0, 2))
    return res


def attention_outputs(c: Definition, x: Mapping[str, jax.Array], vis: jax.Array,
                      precision: Any = HIGHEST, twin: bool = False) -> dict[str, jax.Array]:
    """The op's outputs under definition ``c`` from the arrays ``x`` (op names: ``q``, ``k``,
    ``v``; optional ``bias``, ``sinks`` and the cotangent ``do``) and visibility ``vis``:
    ``out``; with ``do`` the gradient ``d<name>`` of every array but ``do`` (by ``jax.vjp``,
    the lse's cotangent zero); ``lse`` in the contract's base; the contract's magnitudes.
    ``twin``: the low-precision twin, which rounds where ``c.design`` says."""
    diff = tuple(n for n in DIFFERENTIABLE if n in x)
    design = c.design if twin else "plain"
    missing = unmodelled(design, bias="bias" in diff, bias_before_scale=c.bias_before_scale,
                         soft_cap=c.soft_cap is not None, sinks="sinks" in diff,
                         normalized=c.normalize != "none")
    if missing:
        raise ValueError(f"the {design} precision design does not model this definition: "
                         f"{', '.join(missing)} (declare the plain design)")

    def f(*args: jax.Array) -> tuple[jax.Array, jax.Array]:
        a = dict(zip(diff, args, strict=True))
        if design == "flash":
            return flash_attend(a["q"], a["k"], a["v"], vis, c.scale, layout=c.layout)
        if design == "jax-flash":
            return jax_flash_attend(a["q"], a["k"], a["v"], vis, c.scale, layout=c.layout,
                                    bias=a.get("bias"), kv_block=c.kv_block)
        return attend(a["q"], a["k"], a["v"], vis, c.scale, layout=c.layout,
                      bias=a.get("bias"), bias_before_scale=c.bias_before_scale,
                      soft_cap=c.soft_cap, sinks=a.get("sinks"), normalize=c.normalize,
                      precision=precision)

    if "do" in x:
        (out, lse), vjp = jax.vjp(f, *(x[n] for n in diff))
        grads = vjp((x["do"], jnp.zeros_like(lse)))
        res = {"out": out, **{f"d{n}": g for n, g in zip(diff, grads, strict=True)}}
    else:
        out, lse = f(*(x[n] for n in diff))
        res = {"out": out}
    if c.lse is not None:
        res["lse"] = lse if c.lse == "natural" else lse / math.log(2.0)
    if c.magnitudes:
        res.update(gradient_magnitudes(c, x, vis, out, lse, precision))
    return res


@functools.lru_cache(maxsize=64)
def _program(c: Definition, precision: Any, cpu: bool, twin: bool
             ) -> Callable[..., dict[str, jax.Array]]:
    # jit traces once per set of arrays (the dict's keys are part of its input structure)
    return jax.jit(functools.partial(attention_outputs, c, precision=precision, twin=twin),
                   compiler_options=_CPU_OPTIONS if cpu else None)


def run_call(call: AttentionCall, dtype: Any, device: jax.Device,
             precision: Any = HIGHEST, twin: bool = False) -> dict[str, np.ndarray]:
    """The call's outputs, its arrays in ``dtype`` on ``device`` at ``precision`` (the
    low-precision ``twin``: rounded where the definition's design says), returned as
    float32 numpy arrays under the family's names."""
    arrays = {n: np.asarray(a, dtype) for n, a in call.arrays().items()}
    program = _program(call.definition, precision, device.platform == "cpu", twin)
    with jax.default_device(device):
        outs = program(arrays, jnp.asarray(call.vis, bool))
    res = {_family_name(call.names, n): np.asarray(a, np.float32) for n, a in outs.items()}
    res.update({n: np.zeros(shape, np.float32) for n, shape in call.absent.items()})
    return res


def _family_name(names: Mapping[str, str], op_name: str) -> str:
    """``op_name`` under the family's ``names``; ``<output>:magnitude`` follows its output."""
    output, colon, suffix = op_name.partition(":")
    return names.get(op_name, names.get(output, output) + colon + suffix)


def float32_outputs(call: AttentionCall) -> dict[str, np.ndarray]:
    """The reference's outputs of ``call``: float32 at HIGHEST precision on the CPU."""
    return run_call(call, np.float32, jax.devices("cpu")[0], HIGHEST)


Arrays = dict[str, np.ndarray]
CallOf = Callable[[Any, Mapping[str, np.ndarray]], AttentionCall]


def references(call_of: CallOf) -> tuple[Callable[[Any, Arrays], Arrays],
                                         Callable[[Any, Arrays, Backend], Arrays]]:
    """``(reference, low_precision_reference)`` of a family whose cases map onto the op by
    ``call_of(case, inputs)``: float32 at HIGHEST on the CPU, and the case's own dtype at
    the backend's default matmul precision on its device (the calibrated judge's
    yardstick; README "Calibrated bounds")."""

    def reference(case: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every checked output from the dtype-rounded inputs, computed in float32 at
        HIGHEST precision on the CPU (the attention op, :mod:`.program`)."""
        return float32_outputs(call_of(case, inputs))

    def low_precision_reference(case: Any, inputs: dict[str, np.ndarray],
                                backend: Backend) -> dict[str, np.ndarray]:
        """The same outputs computed in ``case.dtype`` at the default matmul precision on
        ``backend``'s device, rounded where the kernel's precision design says (returned as
        float32 arrays)."""
        return run_call(call_of(case, inputs), jnp.dtype(case.dtype), backend.device, None,
                        twin=True)

    return reference, low_precision_reference
