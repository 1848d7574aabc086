"""Part of :mod:`kernel_harness.core.compat`: extensions of jax's TPU interpreter that
kernels needing them switch on explicitly (a module of its own to keep each module short).

jax 0.10.2 and 0.12.0.1 cannot interpret jax's TPU ragged paged attention kernel, nor
tpu-inference's ragged paged attention v3:

- **reads through reshaped or bitcast refs**: the interpreter's ``get`` callback turns a
  ref's transforms into an index range and assumes every transform is an ``NDIndexer``
  (``interpret/utils.py`` ``to_range``: "For now, assume only NDIndexer transforms"); a
  load from ``ref.reshape(...)`` or ``ref.bitcast(...)`` fails with
  ``AttributeError: 'ReshapeTransform' object has no attribute 'indices'``. The extension
  reads the range of the leading ``NDIndexer`` s with the interpreter's own ``get`` (its
  race detection and access records see that read) and applies the rest on the host with
  the semantics of ``jax._src.state.discharge.transform_array`` (reshape, the TPU bitcast
  that packs along the second-minor axis, strided/int indexing).
- **stores and DMA writes through reshaped or bitcast refs** (``swap``, and ``store``,
  which a DMA's write calls): the same assumption. The extension reads the block of the
  leading indexers with the interpreter's ``get``, writes the value into it on the host
  through the inverse transforms and stores the whole block with the interpreter's own
  ``swap``/``store``. Race detection therefore records such an access on the whole range
  of its leading indexers (often the whole buffer): with it on, a kernel that writes
  through transforms may be reported racing where it does not.
- **masked stores to refs of rank >= 2**: ``SharedMemory.swap_buffer_content`` builds its
  in-bounds mask with ``in_bounds_mask[in_bounds_shape[i]:] = False`` for every axis ``i``,
  i.e. always along axis 0, so a fully in-bounds masked store of shape (8, 2, 128) is
  rejected as "Out-of-bounds masked swap" whenever the mask is set in rows >= 2. For a
  store whose range lies fully in bounds the extension merges the masked value with the
  current contents and hands the interpreter an unmasked store of the merged block; any
  other store goes to the interpreter unchanged.

Neither changes a result the interpreter already produces: each handles only inputs the
interpreter crashes on or wrongly rejects. An interpreter not laid out as expected is an
:class:`~kernel_harness.core.compat.InterpreterLayoutError` naming the piece.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from kernel_harness.core.compat import (
    InterpreterLayoutError,
    restore_attributes,
    saved_attribute,
)

_LOCK = threading.RLock()
_DEPTH = [0]
_SAVED: list[tuple[Any, str, Any]] = []


def _pieces() -> tuple[Any, Any, Any, Any]:
    """(interpret_pallas_call module, SharedMemory, state types module, indexing module)."""
    try:
        from jax._src.pallas.mosaic.interpret import interpret_pallas_call as ipc
        from jax._src.pallas.mosaic.interpret import shared_memory as shm
        from jax._src.state import indexing
        from jax._src.state import types as state_types
    except ImportError as e:
        raise InterpreterLayoutError(f"cannot import the interpreter modules: {e}") from None
    get = getattr(ipc, "get", None)
    if get is None or not callable(getattr(get, "__wrapped__", None)):
        raise InterpreterLayoutError("interpret_pallas_call.get (a wrapped callback) is missing")
    params = tuple(inspect.signature(get.__wrapped__).parameters)[:6]
    if params != ("token", "device_id", "local_core_id", "memory_space", "buffer_id",
                  "transforms"):
        raise InterpreterLayoutError(f"interpret_pallas_call.get takes {params}")
    for name in ("swap", "store"):
        fn = getattr(ipc, name, None)
        if fn is None or not callable(getattr(fn, "__wrapped__", None)):
            raise InterpreterLayoutError(f"interpret_pallas_call.{name} (a wrapped callback) "
                                         "is missing")
        params = tuple(inspect.signature(fn.__wrapped__).parameters)[:7]
        if params != ("token", "device_id", "local_core_id", "memory_space", "buffer_id",
                      "transforms", "val"):
            raise InterpreterLayoutError(f"interpret_pallas_call.{name} takes {params}")
    mem = getattr(shm, "SharedMemory", None)
    swap = getattr(mem, "swap_buffer_content", None)
    if swap is None or tuple(inspect.signature(swap).parameters)[:5] != (
            "self", "key", "rnge", "value", "mask"):
        raise InterpreterLayoutError("SharedMemory.swap_buffer_content(self, key, rnge, value, "
                                     "mask, ...) is missing")
    for module, names in ((state_types, ("ReshapeTransform", "BitcastTransform")),
                          (indexing, ("NDIndexer", "Slice"))):
        for name in names:
            if not hasattr(module, name):
                raise InterpreterLayoutError(f"{module.__name__}.{name} is missing")
    return ipc, mem, state_types, indexing


def host_bitcast(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """TPU ref bitcast on the host: a bitwidth change scales the second-minor axis, the
    narrower elements of one wide element lying in consecutive second-minor rows, the
    first in the low bits (``jax._src.state.utils.bitcast``, little-endian host)."""
    xb, yb = x.dtype.itemsize, np.dtype(dtype).itemsize
    if xb == yb:
        return x.view(dtype)
    if x.ndim < 2 or (x.shape[-2] * xb) % yb:
        raise ValueError(f"cannot bitcast {x.shape} {x.dtype} to {dtype}")
    lead, rows, cols = x.shape[:-2], x.shape[-2], x.shape[-1]
    if xb < yb:
        r = yb // xb
        packed = np.ascontiguousarray(x.reshape(*lead, rows // r, r, cols).swapaxes(-1, -2))
        return packed.view(dtype)[..., 0]
    r = xb // yb
    split = np.ascontiguousarray(x)[..., None].view(dtype)  # [..., rows, cols, r]
    return np.ascontiguousarray(split.swapaxes(-1, -2)).reshape(*lead, rows * r, cols)


def _apply(value: np.ndarray, transforms: list[Any], state_types: Any, indexing: Any
           ) -> np.ndarray:
    for t in transforms:
        if isinstance(t, state_types.ReshapeTransform):
            value = value.reshape(t.shape)
        elif isinstance(t, state_types.BitcastTransform):
            value = host_bitcast(value, np.dtype(t.dtype))
        elif isinstance(t, indexing.NDIndexer):
            value = value[_index(t, indexing)]
        else:
            raise NotImplementedError(f"ref transform {type(t).__name__} in a TPU-interpreted "
                                      "read (kernel_harness.core.compat.interpreter_ext)")
    return value


def _reading_through_transforms(fn: Any, state_types: Any, indexing: Any) -> Any:
    def get(token, device_id, local_core_id, memory_space, buffer_id, transforms, *args,
            **kwargs):
        ts, n = _leading_indexers(transforms, indexing)
        if n < len(ts):
            token, value = fn(token, device_id, local_core_id, memory_space, buffer_id,
                              tuple(ts[:n]), *args, **kwargs)
            return token, _apply(np.asarray(value), ts[n:], state_types, indexing)
        return fn(token, device_id, local_core_id, memory_space, buffer_id, transforms,
                  *args, **kwargs)

    return get


def _written(block: np.ndarray, transforms: list[Any], value: np.ndarray,
             mask: np.ndarray | None, state_types: Any, indexing: Any) -> np.ndarray:
    """``block`` with ``value`` stored (where ``mask``) through ``transforms``: the inverse
    of :func:`_apply`, one transform at a time (a reshape or bitcast is undone after the
    store below it; an indexer stores into a copy of its sub-block)."""
    if not transforms:
        if np.shape(value) != block.shape:
            raise ValueError(f"a store of shape {np.shape(value)} through ref transforms "
                             f"into a view of shape {block.shape}")
        return np.asarray(value if mask is None else np.where(mask, value, block), block.dtype)
    t, rest = transforms[0], transforms[1:]
    if isinstance(t, state_types.ReshapeTransform):
        inner = _written(block.reshape(t.shape), rest, value, mask, state_types, indexing)
        return inner.reshape(block.shape)
    if isinstance(t, state_types.BitcastTransform):
        inner = _written(host_bitcast(block, np.dtype(t.dtype)), rest, value, mask,
                         state_types, indexing)
        return host_bitcast(inner, block.dtype)
    index = _index(t, indexing)
    out = np.array(block)
    out[index] = _written(np.array(block[index]), rest, value, mask, state_types, indexing)
    return out


def _index(t: Any, indexing: Any) -> tuple[Any, ...]:
    index: list[Any] = []
    for i in t.indices:
        if isinstance(i, indexing.Slice):
            start, size, stride = int(i.start), int(i.size), int(i.stride)
            index.append(slice(start, start + size * stride, stride))
        elif np.ndim(i) == 0:
            index.append(int(i))
        else:
            raise NotImplementedError("advanced indexing after a reshape/bitcast")
    return tuple(index)


def _leading_indexers(transforms: Any, indexing: Any) -> tuple[list[Any], int]:
    """The transforms as a list, and how many leading ones are plain ``NDIndexer`` s (all
    of them: the interpreter handles the access itself)."""
    ts = list(transforms) if isinstance(transforms, (tuple, list)) else []
    n = 0
    while n < len(ts) and isinstance(ts[n], indexing.NDIndexer):
        n += 1
    return ts, n


def _merged_block(get: Any, token: Any, ids: tuple[Any, ...], ts: list[Any], n: int,
                  val: Any, mask: Any, kwargs: dict[str, Any], state_types: Any,
                  indexing: Any) -> tuple[Any, np.ndarray]:
    """(token, the block of the leading ``n`` indexers with ``val`` written into it through
    the rest of the transforms), the block read with the interpreter's ``get`` (its race
    detection sees the read)."""
    info = {k: kwargs[k] for k in ("source_info", "clock", "src_device_id",
                                   "src_local_core_id") if k in kwargs}
    token, block = get(token, *ids, tuple(ts[:n]), **info)
    return token, _written(np.asarray(block), ts[n:], np.asarray(val),
                           None if mask is None else np.asarray(mask), state_types, indexing)


def _storing_through_transforms(swap: Any, get: Any, state_types: Any, indexing: Any) -> Any:
    """``swap`` for stores through reshaped/bitcast refs: the block of the leading indexers,
    with the value stored into it on the host (:func:`_merged_block`), stored whole with the
    interpreter's ``swap`` (seen by its race detection); the old view is returned."""
    def wrapped(token, device_id, local_core_id, memory_space, buffer_id, transforms, val,
                mask, *args, **kwargs):
        ts, n = _leading_indexers(transforms, indexing)
        ids = (device_id, local_core_id, memory_space, buffer_id)
        if n == len(ts):
            return swap(token, *ids, transforms, val, mask, *args, **kwargs)
        token, merged = _merged_block(get, token, ids, ts, n, val, mask, kwargs, state_types,
                                      indexing)
        token, old = swap(token, *ids, tuple(ts[:n]), merged, None, *args, **kwargs)
        return token, _apply(np.asarray(old), ts[n:], state_types, indexing)

    return wrapped


def _writing_through_transforms(store: Any, get: Any, state_types: Any, indexing: Any
                                ) -> Any:
    """``store`` (a plain store, and the write of a DMA) through reshaped/bitcast refs, as
    :func:`_storing_through_transforms` does for ``swap``."""
    def wrapped(token, device_id, local_core_id, memory_space, buffer_id, transforms, val,
                *args, **kwargs):
        ts, n = _leading_indexers(transforms, indexing)
        ids = (device_id, local_core_id, memory_space, buffer_id)
        if n == len(ts):
            return store(token, *ids, transforms, val, *args, **kwargs)
        _, merged = _merged_block(get, token, ids, ts, n, val, None, kwargs, state_types,
                                  indexing)
        return store(token, *ids, tuple(ts[:n]), merged, *args, **kwargs)

    return wrapped


def _fixed_masked_swap(orig: Any) -> Any:
    def swap_buffer_content(self, key, rnge, value, mask, *args, **kwargs):
        if mask is None or np.ndim(mask) < 2:
            return orig(self, key, rnge, value, mask, *args, **kwargs)
        with self.lock:
            try:
                current = np.array(self.mem[key][rnge])
            except IndexError:
                current = None
        if current is None or current.shape != np.shape(value):
            return orig(self, key, rnge, value, mask, *args, **kwargs)  # not fully in bounds
        # Fully in bounds: one unmasked store of the merged block. (Read and store are two
        # lock sections; the kernels that need this run their grid on one core.)
        mask = np.asarray(mask)
        result, shape_and_dtype, clock = orig(self, key, rnge, np.where(mask, value, current),
                                              None, *args, **kwargs)
        if result is not None:
            result = np.where(mask, result, value)
        return result, shape_and_dtype, clock

    return swap_buffer_content


def extensions_in_force() -> bool:
    """Whether :func:`tpu_interpreter_extensions` is entered now (anywhere in the process)."""
    with _LOCK:
        return _DEPTH[0] > 0


@contextlib.contextmanager
def tpu_interpreter_extensions() -> Iterator[None]:
    """Within the context (re-entrant), the TPU interpreter reads through reshaped and
    bitcast refs and accepts in-bounds masked stores to refs of rank >= 2 (module doc).

    Programs traced inside keep the extended read (it is part of their trace) and are
    correct outside too; the masked-store fix is undone on exit.
    """
    with _LOCK:
        if _DEPTH[0] == 0:
            ipc, mem, state_types, indexing = _pieces()
            get = _reading_through_transforms(ipc.get, state_types, indexing)
            get.__wrapped__ = _reading_through_transforms(ipc.get.__wrapped__, state_types,
                                                          indexing)
            swap = _storing_through_transforms(ipc.swap, ipc.get, state_types, indexing)
            swap.__wrapped__ = _storing_through_transforms(
                ipc.swap.__wrapped__, ipc.get.__wrapped__, state_types, indexing)
            store = _writing_through_transforms(ipc.store, ipc.get, state_types, indexing)
            store.__wrapped__ = _writing_through_transforms(
                ipc.store.__wrapped__, ipc.get.__wrapped__, state_types, indexing)
            _SAVED.extend([saved_attribute(ipc, "get"), saved_attribute(ipc, "swap"),
                           saved_attribute(ipc, "store"),
                           saved_attribute(mem, "swap_buffer_content")])
            ipc.get = get
            ipc.swap = swap
            ipc.store = store
            mem.swap_buffer_content = _fixed_masked_swap(mem.swap_buffer_content)
        _DEPTH[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            _DEPTH[0] -= 1
            if _DEPTH[0] == 0:
                restore_attributes(_SAVED)
