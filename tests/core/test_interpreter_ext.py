"""compat_ext: the two TPU-interpreter extensions the ragged paged attention kernel needs.

Each test shows the interpreter failing without the extension (so it is needed on this jax)
and the extended interpreter giving the exact plain-numpy result."""

from __future__ import annotations

import contextlib
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from kernel_harness.core import compat
from kernel_harness.core.compat.interpreter_ext import host_bitcast, tpu_interpreter_extensions

_PLAIN = functools.partial(compat.tpu_interpret_params, detect_races=False,
                           uninitialized_memory="zero", num_cores_or_threads=1)


def _reshaped_strided_read(x):
    """Reads rows 1, 3, 5, ... of x viewed through ref.reshape (and a bitcast for bf16)."""
    def body(x_ref, o_ref):
        r = x_ref.reshape(x.shape[0] * x.shape[1], x.shape[2])
        if x.dtype == jnp.bfloat16:
            b = r.bitcast(jnp.uint32)[0::2, :]
            o_ref[...] = pltpu.bitcast(b & jnp.uint32(0xFFFF0000), jnp.float32)
        else:
            o_ref[...] = r[1::2, :]
    rows = x.shape[0] * x.shape[1] // 2
    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((rows // (
        2 if x.dtype == jnp.bfloat16 else 1), x.shape[2]), jnp.float32))(x)


def _masked_3d_store(x):
    """Stores x into a (4, 2, 8) slice of a (4, 4, 8) ref where row index >= 2."""
    def body(x_ref, o_ref):
        o_ref[...] = jnp.zeros(o_ref.shape, o_ref.dtype)
        rows = jax.lax.broadcasted_iota(jnp.int32, x_ref.shape, 0)
        pltpu.store(o_ref.at[:, 0:2, :], x_ref[...], mask=rows >= 2)
    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((4, 4, 8), jnp.float32))(x)


def _run(fn, x, extended):
    jax.clear_caches()
    with compat.forced_tpu_interpret_mode(_PLAIN()):
        if extended:
            with tpu_interpreter_extensions():
                return np.asarray(jax.block_until_ready(jax.jit(fn)(x)))
        return np.asarray(jax.block_until_ready(jax.jit(fn)(x)))


def test_read_through_reshape_needs_the_extension_and_is_exact():
    x = np.arange(4 * 2 * 8, dtype=np.float32).reshape(4, 2, 8)
    with pytest.raises(Exception, match="ReshapeTransform"):
        _run(_reshaped_strided_read, x, extended=False)
    compat.reset_tpu_interpret_state()
    np.testing.assert_array_equal(_run(_reshaped_strided_read, x, extended=True),
                                  x.reshape(8, 8)[1::2])


def test_read_through_bitcast_packs_like_the_tpu():
    """bf16 rows 2i (low half-word) and 2i+1 (high) share uint32 row i: the high half of
    row 0 of the packed view is bf16 row 1."""
    x = (np.arange(4 * 4 * 8, dtype=np.float32).reshape(4, 4, 8) / 7).astype(jnp.bfloat16)
    got = _run(_reshaped_strided_read, x, extended=True)
    np.testing.assert_array_equal(got, np.asarray(x, np.float32).reshape(16, 8)[1::4])


def test_host_bitcast_matches_jax_state_bitcast():
    from jax._src.state.utils import bitcast

    x = (np.random.default_rng(0).standard_normal((2, 6, 4))).astype(jnp.bfloat16)
    np.testing.assert_array_equal(host_bitcast(np.asarray(x), np.dtype(np.uint32)),
                                  np.asarray(bitcast(jnp.asarray(x), jnp.uint32)))
    u = np.asarray(bitcast(jnp.asarray(x), jnp.uint32))
    np.testing.assert_array_equal(host_bitcast(u, np.dtype(jnp.bfloat16)).view(np.uint16),
                                  np.asarray(x).view(np.uint16))


def test_masked_store_to_3d_ref_needs_the_fix_and_is_exact():
    x = np.arange(4 * 2 * 8, dtype=np.float32).reshape(4, 2, 8) + 1
    with pytest.raises(Exception, match="Out-of-bounds masked swap"):
        _run(_masked_3d_store, x, extended=False)
    compat.reset_tpu_interpret_state()
    want = np.zeros((4, 4, 8), np.float32)
    want[2:, 0:2] = x[2:]
    np.testing.assert_array_equal(_run(_masked_3d_store, x, extended=True), want)


def _store_through_transforms(x):
    """Writes x (bf16 [8, 8]) into rows 0..7 of a [2, 8, 8] output through a reshape and
    a uint32 bitcast (a swap), and copies the same rows by DMA into a reshaped ref."""
    def body(x_ref, o_ref, d_ref, sem):
        o_ref[...] = jnp.zeros(o_ref.shape, o_ref.dtype)
        packed = pltpu.bitcast(x_ref[...], jnp.uint32)  # [4, 8]
        o_ref.reshape(16, 8).bitcast(jnp.uint32)[2:6, :] = packed
        copy = pltpu.make_async_copy(x_ref, d_ref.reshape(16, 8).at[8:16], sem)
        copy.start()
        copy.wait()
    any_spec = pl.BlockSpec(memory_space=pltpu.HBM)
    return pl.pallas_call(
        body, in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
        out_specs=[pl.BlockSpec(memory_space=pltpu.VMEM), any_spec],
        scratch_shapes=[pltpu.SemaphoreType.DMA(())],
        out_shape=[jax.ShapeDtypeStruct((2, 8, 8), jnp.bfloat16)] * 2)(x)


def test_store_and_dma_through_reshape_and_bitcast_are_exact():
    """Stores and DMA writes through ref.reshape/ref.bitcast (what tpu-inference's ragged
    paged attention v3 does) fail unextended and land exactly where a TPU puts them."""
    x = (np.arange(8 * 8, dtype=np.float32).reshape(8, 8) / 3).astype(jnp.bfloat16)

    def run(extended):
        jax.clear_caches()
        with compat.forced_tpu_interpret_mode(_PLAIN()):
            ctx = tpu_interpreter_extensions() if extended else contextlib.nullcontext()
            with ctx:
                return [np.asarray(a, np.float32)
                        for a in jax.block_until_ready(jax.jit(_store_through_transforms)(x))]

    with pytest.raises(Exception, match="Transform"):
        run(extended=False)
    compat.reset_tpu_interpret_state()
    stored, copied = run(extended=True)
    want = np.zeros((16, 8), np.float32)
    want[4:12] = np.asarray(x, np.float32)
    np.testing.assert_array_equal(stored.reshape(16, 8), want)
    np.testing.assert_array_equal(copied.reshape(16, 8)[8:], np.asarray(x, np.float32))


def test_extensions_are_removed_on_exit():
    from jax._src.pallas.mosaic.interpret import interpret_pallas_call as ipc
    from jax._src.pallas.mosaic.interpret import shared_memory as shm

    get, swap = ipc.get, shm.SharedMemory.__dict__.get("swap_buffer_content")
    with tpu_interpreter_extensions(), tpu_interpreter_extensions():
        assert ipc.get is not get
    assert ipc.get is get
    assert shm.SharedMemory.__dict__.get("swap_buffer_content") is swap


def test_unknown_interpreter_layout_is_named(monkeypatch):
    from jax._src.pallas.mosaic.interpret import interpret_pallas_call as ipc

    monkeypatch.delattr(ipc, "get")
    with pytest.raises(compat.InterpreterLayoutError) as err:
        with tpu_interpreter_extensions():
            pass
    assert f"jax {jax.__version__}" in str(err.value) and "get" in str(err.value)
