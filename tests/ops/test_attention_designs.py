"""Precision designs (ops/attention/designs.py, issue 56): the calibrated judge's twin rounds
where the kernel declares it rounds. A FlashAttention-style kernel (written here blockwise,
as such kernels run: online softmax over key blocks, float32 accumulators, base 2, q
pre-scaled and P rounded to bfloat16) fails the plain twin's bound at 16x logits and passes
the flash twin's; the same kernel with its softmax exponent in bfloat16 fails both."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kernel_harness.core.calibrate import measure_calibrated
from kernel_harness.core.tolerance import standard_floor
from kernel_harness.ops.attention.program import (
    AttentionCall,
    Definition,
    float32_outputs,
    run_call,
)

D, N, H, BLOCK = 128, 256, 2, 64
SCALE = 1 / math.sqrt(D)


def _blockwise(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, bf16_exponent: bool
               ) -> np.ndarray:
    """out of a FlashAttention-style forward, one key block at a time (``[b, h, n, d]``
    bfloat16 in and out); ``bf16_exponent``: the planted bug, logits rounded to bfloat16
    before the exponential."""
    f32, bf16 = jnp.float32, jnp.bfloat16
    qs = (jnp.asarray(q, f32) * (SCALE * math.log2(math.e))).astype(bf16)
    m = jnp.full(q.shape[:3] + (1,), -jnp.inf, f32)
    rows = jnp.zeros(q.shape[:3] + (1,), f32)
    acc = jnp.zeros(q.shape, f32)
    for lo in range(0, k.shape[2], BLOCK):
        kb, vb = jnp.asarray(k[:, :, lo:lo + BLOCK]), jnp.asarray(v[:, :, lo:lo + BLOCK])
        s = jnp.einsum("bhqd,bhkd->bhqk", qs, kb, preferred_element_type=f32)
        if bf16_exponent:
            s = s.astype(bf16).astype(f32)
        m_new = jnp.maximum(m, s.max(-1, keepdims=True))
        p = jnp.exp2(s - m_new)
        rescale = jnp.exp2(m - m_new)
        rows = rows * rescale + p.sum(-1, keepdims=True)
        acc = acc * rescale + jnp.einsum("bhqk,bhkd->bhqd", p.astype(bf16), vb,
                                         preferred_element_type=f32)
        m = m_new
    return np.asarray((acc / rows).astype(bf16), np.float32)


def _usage(seed: int, logit_scale: float, design: str, *, bug: bool = False) -> float:
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((1, H, N, D)).astype(jnp.bfloat16) for _ in range(3))
    q = (np.asarray(q, np.float32) * logit_scale).astype(jnp.bfloat16)
    call = AttentionCall(definition=Definition(layout="bhqd", scale=SCALE, design=design),
                         q=q, k=k, v=v, vis=np.ones((1, 1, N, N), bool))
    reference = float32_outputs(call)["out"]
    twin = run_call(call, jnp.bfloat16, jax.devices("cpu")[0], None, twin=True)["out"]
    kernel = _blockwise(q, k, v, bf16_exponent=bug)
    return measure_calibrated(kernel, twin, reference, output="out",
                              axes=("batch", "head", "query", "dim"), multiple=2.0,
                              floor=2.0**-8,
                              slice_floor=standard_floor("bfloat16", gradient=False).fraction
                              ).usage


@pytest.mark.parametrize("seed", [0, 1])
def test_a_flash_style_kernel_is_judged_by_its_own_design(seed: int) -> None:
    assert _usage(seed, 16.0, "plain") > 1.0  # the plain twin's bound: a false FAIL
    assert _usage(seed, 16.0, "flash") < 0.8
    assert _usage(seed, 1.0, "flash") < 0.8


@pytest.mark.parametrize("seed", [0, 1])
def test_a_rounding_the_design_does_not_have_still_fails(seed: int) -> None:
    assert _usage(seed, 16.0, "flash", bug=True) > 1.0


def test_the_reference_is_the_same_math_whatever_the_design() -> None:
    rng = np.random.default_rng(3)
    q, k, v, do = (rng.standard_normal((1, H, 64, 32)).astype(np.float32) for _ in range(4))
    outs = [float32_outputs(AttentionCall(
        definition=Definition(layout="bhqd", scale=0.2, design=design), q=q, k=k, v=v, do=do,
        vis=np.tril(np.ones((64, 64), bool))[None, None])) for design in ("plain", "flash")]
    for name in ("out", "dq", "dk", "dv"):
        np.testing.assert_array_equal(outs[0][name], outs[1][name])


def test_a_design_that_does_not_model_the_call_says_so() -> None:
    with pytest.raises(ValueError, match="design must be one of"):
        Definition(layout="bhqd", design="fp8")
    x = np.ones((1, 1, 8, 16), np.float32)
    call = AttentionCall(definition=Definition(layout="bhqd", design="flash", soft_cap=5.0),
                         q=x, k=x, v=x, vis=np.ones((1, 1, 8, 8), bool))
    with pytest.raises(ValueError, match="does not model this definition: it takes a soft cap"):
        run_call(call, jnp.bfloat16, jax.devices("cpu")[0], None, twin=True)
