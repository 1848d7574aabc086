"""The hstu kernel beyond plain interpret mode: it lowers through Mosaic for TPU (no TPU
needed) and passes a hard case under the TPU interpreter (NaN-filled scratch, race
detection, two simulated cores)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kernel_harness import check_case, get_family, resolve_backend
from kernel_harness.core import compat
from kernel_harness.kernels.hstu import api
from kernel_harness.ops.pointwise_attention.cases import HstuCase

FAMILY = get_family("hstu")

HARD = HstuCase(
    dtype="float32", seed=11, batch=2, q_heads=2, head_dim=64, q_len=384, kv_len=512,
    mask="numpy", mask_pattern="tiles", mask_density=0.5, mask_seed=4, window=129,
    q_segments=((2, 130), (0, 1), (1, 253)), kv_segments=((1, 200), (2, 312)),
    block_q=128, block_kv=256, block_kv_compute=128,
    block_q_dkv=384, block_kv_dkv=128, block_kv_dkv_compute=128,
)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
@pytest.mark.parametrize("mask_kind", ["causal", "numpy"])
def test_forward_and_backward_lower_for_tpu(dtype, mask_kind):
    q = jax.ShapeDtypeStruct((2, 256, 2, 64), dtype)
    k = jax.ShapeDtypeStruct((2, 384, 2, 64), dtype)
    ids_q = jax.ShapeDtypeStruct((2, 256), jnp.int32)
    ids_k = jax.ShapeDtypeStruct((2, 384), jnp.int32)
    mask_type = np.random.default_rng(0).random((256, 384)) < 0.5 if mask_kind == "numpy" else (
        mask_kind)

    def fwd_bwd(q, k, v, q_ids, kv_ids):
        out, vjp = jax.vjp(
            lambda q, k, v: api.hstu_attention(
                mask_type, q, k, v, q_segment_ids=q_ids, kv_segment_ids=kv_ids,
                sliding_window_size=100, block_q=128, block_kv=384, block_kv_compute=128,
                block_q_dkv=256, block_kv_dkv=128,
            ),
            q, k, v,
        )
        return out, vjp(out)

    text = compat.lower_for_platform(fwd_bwd, (q, k, k, ids_q, ids_k), "tpu")
    assert text.count("tpu_custom_call") == 2  # the forward and the backward kernel


def test_hard_case_passes_under_the_tpu_interpreter():
    result = check_case(FAMILY, HARD, resolve_backend("tpu-interpret"))
    assert result.passed, [v.problems for v in result.failures]
    assert {"empty-blocks", "partial-blocks", "kv-compute-split", "rows-without-keys"} <= set(
        FAMILY.events(HARD)
    )


def test_hard_case_passes_in_interpret_mode():
    result = check_case(FAMILY, HARD, resolve_backend("interpret"))
    assert result.passed, [v.problems for v in result.failures]
