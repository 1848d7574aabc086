"""Host-side planning of the hstu kernel: block-sparsity tables, fetch indices, the band,
and that numpy masks are traced operands (no recompilation per mask)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.kernels.hstu import api, planning
from kernel_harness.kernels.hstu.forward import BAND_UNBOUNDED

BLOCKS = {"block_q": 128, "block_kv": 128, "block_kv_compute": 128,
          "block_q_dkv": 256, "block_kv_dkv": 128, "block_kv_dkv_compute": 128}


def test_band():
    assert planning.band_of(causal=True, window=None) == (-BAND_UNBOUNDED, 0)
    assert planning.band_of(causal=False, window=None) == (-BAND_UNBOUNDED, BAND_UNBOUNDED)
    assert planning.band_of(causal=True, window=3) == (-3, 0)
    assert planning.band_of(causal=False, window=0) == (0, 0)


def test_causal_flags_are_lower_triangular_for_unequal_lengths():
    t = planning.make_tables(None, True, None, 512, 384, BLOCKS)
    np.testing.assert_array_equal(t["fwd_flags"], np.tril(np.ones((4, 3), np.int32)))
    # backward: [kv block, q block] with 256-row q blocks
    np.testing.assert_array_equal(t["bwd_flags"], [[1, 1], [1, 1], [0, 1]])


def test_window_flags_match_a_dense_computation():
    for causal in (False, True):
        for window in (0, 1, 127, 128, 129, 300):
            t = planning.make_tables(None, causal, window, 512, 384, BLOCKS)
            i, j = np.arange(512)[:, None], np.arange(384)[None, :]
            dense = (np.abs(i - j) <= window) & ((j <= i) | (not causal))
            want = dense.reshape(4, 128, 3, 128).any(axis=(1, 3))
            np.testing.assert_array_equal(t["fwd_flags"], want, err_msg=f"{causal=} {window=}")


def test_numpy_mask_empty_tiles_are_skipped_and_fetch_points_ahead():
    mask = np.zeros((256, 512), bool)
    mask[:128, 384:] = True  # row block 0 needs kv block 3 only
    mask[200, 5] = True  # row block 1 needs kv block 0 only
    t = planning.make_tables(mask, False, None, 256, 512, BLOCKS)
    np.testing.assert_array_equal(t["fwd_flags"], [[0, 0, 0, 1], [1, 0, 0, 0]])
    np.testing.assert_array_equal(t["fwd_fetch"], [[3, 3, 3, 3], [0, 0, 0, 0]])
    assert t["mask"].dtype == np.int32 and t["mask_t"].shape == (512, 256)


def test_fetch_table():
    flags = np.array([[0, 1, 0, 0, 1, 0], [0, 0, 0, 0, 0, 0]], bool)
    np.testing.assert_array_equal(
        planning.fetch_table(flags), [[1, 1, 4, 4, 4, 4], [0, 0, 0, 0, 0, 0]]
    )


def test_table_cache_tells_masks_apart():
    a = np.zeros((128, 128), bool)
    b = a.copy()
    b[3, 4] = True
    blocks = {**BLOCKS, "block_q_dkv": 128}
    ta = planning.cached_tables(a, False, None, 128, 128, blocks)
    tb = planning.cached_tables(b, False, None, 128, 128, blocks)
    assert ta["fwd_flags"].sum() == 0 and tb["fwd_flags"].sum() == 1
    assert planning.cached_tables(b.copy(), False, None, 128, 128, blocks) is tb


def test_numpy_masks_share_one_compiled_program_and_empty_mask_gives_zeros():
    rng = np.random.default_rng(0)
    q = jnp.asarray(rng.standard_normal((1, 128, 1, 32)), jnp.float32)

    def grads(mask):
        out, vjp = jax.vjp(
            lambda q, k, v: api.hstu_attention(mask, q, k, v, interpret=True), q, q, q
        )
        return (out, *vjp(jnp.ones_like(out)))

    grads(rng.random((128, 128)) < 0.5)
    before = api.run_planned._cache_size()
    grads(rng.random((128, 128)) < 0.3)
    results = grads(np.zeros((128, 128), bool))
    assert api.run_planned._cache_size() == before
    for x in results:
        assert np.all(np.asarray(x) == 0.0)
