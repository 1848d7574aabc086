"""Torch callables under JAX: ``jax.pure_callback`` forward, ``jax.custom_vjp`` backward
through ``torch.autograd`` (docs/torch.md).

:func:`torch_function` turns ``fn(*tensors) -> tensor | tuple[tensor, ...]`` into a JAX
function of arrays that works eagerly, under ``jax.jit`` and under ``jax.vjp``/``jax.grad``:

- forward: the arrays reach the host, become torch tensors on ``device`` with the very same
  dtype (:data:`DTYPES`: bfloat16 included, by a bit view, never through float32), ``fn``
  runs, and its outputs must have exactly the shapes and dtypes declared (or inferred on
  torch's ``meta`` device): a mismatch is a :class:`TorchBridgeError`, never a cast;
- backward: ``fn`` runs again on tensors that require grad (the floating ones in
  ``diff_argnums``) and ``torch.autograd.grad`` gives the cotangents; an input torch does
  not differentiate gets zeros, an integer or bool input none (JAX's float0).

torch is imported on first use, so importing this module needs no torch.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

#: numpy/JAX dtype name -> torch dtype attribute name: exact, no widening or narrowing.
DTYPES: dict[str, str] = {
    "float64": "float64", "float32": "float32", "float16": "float16",
    "bfloat16": "bfloat16", "int64": "int64", "int32": "int32", "int16": "int16",
    "int8": "int8", "uint8": "uint8", "bool": "bool",
    "complex64": "complex64", "complex128": "complex128",
}


class TorchBridgeError(TypeError):
    """A dtype without an exact torch counterpart, or a torch output other than declared."""


def torch_available() -> bool:
    """Whether ``import torch`` can succeed (finds the package; imports nothing)."""
    return importlib.util.find_spec("torch") is not None


def _torch() -> Any:
    import torch  # noqa: PLC0415 - lazy: the harness imports without torch

    return torch


def torch_dtype(dtype: Any) -> Any:
    """The torch dtype equal to numpy/JAX ``dtype``, or :class:`TorchBridgeError`."""
    name = jnp.dtype(dtype).name
    if name not in DTYPES:
        raise TorchBridgeError(f"dtype {name} has no exact torch counterpart; "
                               f"the bridge maps only {sorted(DTYPES)}")
    return getattr(_torch(), DTYPES[name])


def numpy_dtype(tdtype: Any) -> np.dtype:
    """The numpy dtype (ml_dtypes' bfloat16 for torch.bfloat16) equal to torch ``tdtype``."""
    name = str(tdtype).removeprefix("torch.")
    for np_name, t_name in DTYPES.items():
        if t_name == name:
            return jnp.dtype(np_name)
    raise TorchBridgeError(f"torch dtype {tdtype} has no counterpart in the bridge "
                           f"({sorted(DTYPES.values())})")


def to_torch(array: Any, device: str = "cpu") -> Any:
    """A torch tensor on ``device`` with ``array``'s values, shape and exact dtype."""
    torch = _torch()
    a = np.ascontiguousarray(np.asarray(array))
    target = torch_dtype(a.dtype)
    if a.dtype.name == "bfloat16":  # numpy has no bfloat16: move the bits
        t = torch.from_numpy(a.view(np.uint16).astype(np.int16, copy=False)).view(target)
    else:
        t = torch.from_numpy(a.copy())
    return t.to(device)


def to_numpy(tensor: Any) -> np.ndarray:
    """``tensor``'s values as a numpy array of the equal dtype (bfloat16 by a bit view)."""
    torch = _torch()
    t = tensor.detach().to("cpu").contiguous()
    dtype = numpy_dtype(t.dtype)
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16).view(dtype)
    return t.numpy()


def _as_tuple(out: Any) -> tuple[Any, ...]:
    return tuple(out) if isinstance(out, tuple | list) else (out,)


def _check_outputs(outs: Sequence[Any], expected: Sequence[jax.ShapeDtypeStruct],
                   what: str) -> None:
    if len(outs) != len(expected):
        raise TorchBridgeError(f"{what}: torch returned {len(outs)} outputs, "
                               f"{len(expected)} declared")
    for i, (o, e) in enumerate(zip(outs, expected, strict=True)):
        got = (tuple(o.shape), numpy_dtype(o.dtype))
        if got != (tuple(e.shape), jnp.dtype(e.dtype)):
            raise TorchBridgeError(
                f"{what}: output {i} is {got[1].name}{list(got[0])}, declared "
                f"{jnp.dtype(e.dtype).name}{list(e.shape)} (the bridge never casts)")


def infer_shapes(fn: Callable[..., Any], args: Sequence[Any]
                 ) -> tuple[tuple[jax.ShapeDtypeStruct, ...], bool]:
    """The outputs' shapes and dtypes from one call of ``fn`` on torch's ``meta`` device
    (``args``: shape/dtype structs or None), and whether ``fn`` returns a tuple."""
    torch = _torch()
    metas = [None if a is None else
             torch.empty(tuple(a.shape), dtype=torch_dtype(a.dtype), device="meta")
             for a in args]
    try:
        out = fn(*metas)
    except Exception as e:  # noqa: BLE001 - the user's callable: say what to pass instead
        raise TorchBridgeError(f"cannot infer the outputs of {fn!r} on torch's meta device "
                               f"({type(e).__name__}: {e}); pass out_shapes=") from None
    shapes = tuple(jax.ShapeDtypeStruct(tuple(o.shape), numpy_dtype(o.dtype))
                   for o in _as_tuple(out))
    return shapes, isinstance(out, tuple | list)


def torch_function(
    fn: Callable[..., Any],
    *,
    diff_argnums: Sequence[int] | None = None,
    out_shapes: Callable[..., Sequence[jax.ShapeDtypeStruct]] | None = None,
    device: str = "cpu",
) -> Callable[..., Any]:
    """``fn`` (torch tensors in, a tensor or a tuple of tensors out) as a JAX function.

    Args:
      fn: the torch callable; positional tensor arguments only (bind options with
        ``functools.partial``); an argument passed as None reaches ``fn`` as None.
      diff_argnums: the arguments torch differentiates (default: every floating one);
        the others get zero cotangents.
      out_shapes: ``out_shapes(*arrays) -> [ShapeDtypeStruct, ...]``; default: inferred
        by running ``fn`` on torch's ``meta`` device.
      device: the torch device ``fn`` runs on (``"cpu"``, ``"cuda"``); the arrays cross
        the host either way (``pure_callback``).

    Returns:
      ``f(*arrays)``: a tuple when ``fn`` returns a tuple, else one array.
    """

    def call(*args: Any) -> Any:
        present = tuple(a is not None for a in args)
        arrays = [jnp.asarray(a) for a in args if a is not None]
        specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in arrays]
        for s in specs:
            torch_dtype(s.dtype)  # an unmappable dtype fails here, by name
        full = _with_nones(specs, present)
        if out_shapes is None:
            declared, tupled = infer_shapes(fn, full)
        else:
            declared, tupled = tuple(out_shapes(*full)), len(tuple(out_shapes(*full))) != 1
        declared = tuple(jax.ShapeDtypeStruct(tuple(d.shape), jnp.dtype(d.dtype))
                         for d in declared)
        diff = _diff_positions(diff_argnums, full)
        outs = _bridged(fn, present, declared, diff, device)(*arrays)
        return outs if tupled else outs[0]

    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call


def _with_nones(items: Sequence[Any], present: Sequence[bool]) -> list[Any]:
    it = iter(items)
    return [next(it) if p else None for p in present]


def _diff_positions(diff_argnums: Sequence[int] | None, full: Sequence[Any]) -> frozenset[int]:
    """Positions among the present arguments that torch differentiates."""
    present = [i for i, s in enumerate(full) if s is not None]
    wanted = (set(diff_argnums) if diff_argnums is not None else
              {i for i in present if jnp.issubdtype(full[i].dtype, jnp.inexact)})
    return frozenset(present.index(i) for i in wanted if i in present
                     and jnp.issubdtype(full[i].dtype, jnp.inexact))


def _bridged(fn: Callable[..., Any], present: tuple[bool, ...],
             declared: tuple[jax.ShapeDtypeStruct, ...], diff: frozenset[int],
             device: str) -> Callable[..., tuple[jax.Array, ...]]:
    def torch_call(tensors: Sequence[Any]) -> tuple[Any, ...]:
        return _as_tuple(fn(*_with_nones(list(tensors), present)))

    def host_forward(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        torch = _torch()
        with torch.no_grad():
            outs = torch_call([to_torch(a, device) for a in arrays])
        _check_outputs(outs, declared, f"{fn!r} forward")
        return tuple(to_numpy(o) for o in outs)

    def host_backward(*arrays_and_cts: np.ndarray) -> tuple[np.ndarray, ...]:
        torch = _torch()
        n = len(arrays_and_cts) - len(declared)
        arrays, cts = arrays_and_cts[:n], arrays_and_cts[n:]
        tensors = [to_torch(a, device) for a in arrays]
        for i in diff:
            tensors[i].requires_grad_(True)
        with torch.enable_grad():
            outs = torch_call(tensors)
            _check_outputs(outs, declared, f"{fn!r} backward")
            wrt = [tensors[i] for i in sorted(diff)]
            grads = torch.autograd.grad(
                [o for o in outs if o.requires_grad],
                wrt,
                grad_outputs=[to_torch(c, device) for c, o in zip(cts, outs, strict=True)
                              if o.requires_grad],
                allow_unused=True,
            ) if wrt and any(o.requires_grad for o in outs) else [None] * len(wrt)
        result = []
        for i, g in zip(sorted(diff), grads, strict=True):
            expect = np.asarray(arrays[i])
            if g is None:
                result.append(np.zeros(expect.shape, expect.dtype))
                continue
            g_np = to_numpy(g)
            if g_np.shape != expect.shape or g_np.dtype != expect.dtype:
                raise TorchBridgeError(
                    f"{fn!r}: gradient of input {i} is {g_np.dtype}{list(g_np.shape)}, "
                    f"input is {expect.dtype}{list(expect.shape)} (the bridge never casts)")
            result.append(g_np)
        return tuple(result)

    @jax.custom_vjp
    def f(*arrays: jax.Array) -> tuple[jax.Array, ...]:
        return tuple(jax.pure_callback(host_forward, declared, *arrays))

    def f_fwd(*arrays: jax.Array) -> tuple[tuple[jax.Array, ...], tuple[jax.Array, ...]]:
        return f(*arrays), arrays

    def f_bwd(arrays: tuple[jax.Array, ...], cts: tuple[jax.Array, ...]) -> tuple[Any, ...]:
        grad_specs = tuple(jax.ShapeDtypeStruct(arrays[i].shape, arrays[i].dtype)
                           for i in sorted(diff))
        grads = iter(jax.pure_callback(host_backward, grad_specs, *arrays, *cts)
                     if grad_specs else ())
        return tuple(next(grads) if i in diff
                     else jnp.zeros_like(a) if jnp.issubdtype(a.dtype, jnp.inexact)
                     else None  # integer/bool: no cotangent (JAX takes None as zero)
                     for i, a in enumerate(arrays))

    f.defvjp(f_fwd, f_bwd)
    return f
