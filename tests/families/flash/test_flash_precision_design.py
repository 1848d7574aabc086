"""flash's precision design (``jax-flash``, ops/attention/designs.py): its bfloat16 twin
rounds where jax's TPU flash attention rounds (P rounded normalised in a one-step forward,
D = rowsum(dO * O) from the rounded output, dab = sm_scale * dS rounded once). A pristine
case whose dab used 1.04 of the plain twin's bound (kernel/plain ratio 2.42) passes under
it; a planted precision bug in that dS still fails it."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kernel_harness import check_case, get_family, resolve_backend
from kernel_harness.families.flash.cases import FlashCase
from kernel_harness.ops.attention.features import Features
from kernel_harness.ops.attention.program import AttentionCall, Definition, run_call
from kernel_harness.ops.attention.record import definition
from kernel_harness.records.mutant import Mutant, load_patched
from kernel_harness.run.runner import judge_outputs, low_precision_outputs, run_on_backend

FAMILY = get_family("flash")
BACKEND = resolve_backend("interpret")

#: A drawn pristine case the plain twin failed (dab, seed 893: 2 of 61 seeds of this shape
#: fail it); the forward takes all 512 keys in one step.
CASE = dict(
    dtype="bfloat16", seed=893, batch=1, q_heads=3, kv_heads=3, q_len=384, kv_len=512,
    head_dim=64, is_causal=True, bias="full",
    q_segments=(((1, 8), (1, 19), (1, 29), (1, 223), (1, 105)),),
    kv_segments=(((1, 121), (1, 164), (3, 1), (1, 226)),),
    block_b=1, block_q=96, block_k_major=512, block_k=512, block_q_major_dkv=192,
    block_k_major_dkv=128, block_k_dkv=128, block_q_dkv=192, block_k_major_dq=512,
    block_k_dq=512, block_q_dq=96,
)
_DS = "ds = (dp - jnp.tile(di, (1, block_k // MIN_BLOCK_SIZE))) * p"
#: A real precision bug where the design rounds: the dq kernel (whose dS is dab) takes
#: dP and D in bfloat16 before their cancelling subtraction.
SUBTRACTION_IN_BF16 = Mutant(
    name="dq-ds-subtraction-in-bf16", description="dq: dP - D in bfloat16",
    module="jax.experimental.pallas.ops.tpu.flash_attention", old=_DS,
    new=_DS.replace("(dp - jnp.tile(di, (1, block_k // MIN_BLOCK_SIZE)))",
                    "(dp.astype(jnp.bfloat16) - jnp.tile(di, (1, block_k // MIN_BLOCK_SIZE))"
                    ".astype(jnp.bfloat16)).astype(jnp.float32)"),
    occurrence=2)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlainDesign(FlashCase):
    """The same kernel, declared as rounding like plain bfloat16 math (before)."""

    FEATURES = dataclasses.replace(FlashCase.FEATURES, precision_design="plain")


def _usage(result) -> dict[str, float]:
    return {v.stats.output: v.usage for v in result.verdicts}


def test_the_family_declares_the_design_and_the_forward_path_as_data():
    assert FlashCase.FEATURES.precision_design == "jax-flash"
    one_step = FlashCase(**CASE)
    tiled = dataclasses.replace(one_step, block_k=128)
    assert (definition(one_step).kv_block, definition(tiled).kv_block) == (512, 128)
    assert definition(one_step).design == "jax-flash"


# Nightly: the pristine kernel; the design's planted bug runs per push.
@pytest.mark.nightly
def test_the_case_the_plain_twin_failed_passes_under_its_design():
    case = FlashCase(**CASE)
    own = check_case(FAMILY, case, BACKEND)
    assert own.passed, [v.problems for v in own.failures]
    assert max(_usage(own).values()) < 0.6  # measured: dab 0.47, the others <= 0.39
    # The same kernel outputs against the plain twin (the yardstick before): dab fails.
    inputs = case.materialize()
    actual = run_on_backend(FAMILY, FAMILY.kernel, case, inputs, BACKEND)
    plain = low_precision_outputs(FAMILY, PlainDesign(**CASE), inputs, BACKEND)
    verdicts, _ = judge_outputs(FAMILY, case, actual, FAMILY.reference(case, inputs),
                                low_precision=plain)
    assert {v.stats.output for v in verdicts if not v.passed} == {"dab"}, verdicts


def test_a_precision_bug_in_ds_still_fails_the_design():
    impl = load_patched(SUBTRACTION_IN_BF16).flash_attention
    result = check_case(FAMILY, FlashCase(**CASE), BACKEND, impl)
    bad = {v.stats.output: v for v in result.failures}
    assert "dab" in bad and bad["dab"].judged_by == "calibrated", _usage(result)
    assert bad["dab"].usage > 1.1  # measured 1.18 (dq 0.68, pristine 0.47 and 0.33)


def test_the_twin_follows_the_forward_path():
    rng = np.random.default_rng(0)
    q, k, v, do = (rng.standard_normal((1, 2, 128, 32)).astype(np.float32) for _ in range(4))
    bias = rng.standard_normal((1, 2, 128, 128)).astype(np.float32)
    outs = {}
    for kv_block in (None, 128, 32):
        call = AttentionCall(
            definition=Definition(layout="bhqd", scale=0.25, bias_before_scale=True,
                                  design="jax-flash", kv_block=kv_block),
            q=q, k=k, v=v, do=do, bias=bias, vis=np.tril(np.ones((128, 128), bool))[None, None])
        outs[kv_block] = run_call(call, jnp.bfloat16, jax.devices("cpu")[0], None, twin=True)
    np.testing.assert_array_equal(outs[None]["out"], outs[128]["out"])  # one step: all keys
    assert not np.array_equal(outs[None]["out"], outs[32]["out"])
    # dab is scale * dS rounded once: a bfloat16 value, a gradient of the bias's shape.
    dab = outs[32]["dbias"]
    assert dab.shape == bias.shape
    np.testing.assert_array_equal(dab, dab.astype(jnp.bfloat16).astype(np.float32))


def test_what_the_design_does_not_model_is_an_error():
    names = {"q": "q", "k": "k", "v": "v", "do": "do", "bias": "bias"}
    with pytest.raises(ValueError, match="bias comes after the scale"):
        Features(layout="bhqd", names=names, precision_design="jax-flash")
    x = np.ones((1, 1, 8, 16), np.float32)
    call = AttentionCall(definition=Definition(layout="bhqd", design="jax-flash", soft_cap=5.0),
                         q=x, k=x, v=x, vis=np.ones((1, 1, 8, 8), bool))
    with pytest.raises(ValueError, match="jax-flash precision design"):
        run_call(call, jnp.bfloat16, jax.devices("cpu")[0], None, twin=True)
