"""Array bookkeeping of the metamorphic properties: axis roles, problem sizes,
visibility and the influence of a perturbation (attention-shaped ops), fresh values at
perturbed positions, and the element-wise difference of two runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kernel_harness.core.case import standard_normal
from kernel_harness.records.family import Arrays, Family
from kernel_harness.records.hooks import KEY_ROLES, KEY_ROLES_BY_QHEAD, ROLES, ROW_ROLES


def roles_of(family: Family, name: str) -> tuple[str | None, ...]:
    """The axis roles of input or output ``name``."""
    hooks = family.metamorphic
    if hooks is not None and name in hooks.roles:
        return tuple(hooks.roles[name])
    if name in family.output_axes:
        return tuple(family.output_axes[name])
    raise KeyError(f"{family.name}: no axis roles for {name!r}")


def problem_sizes(family: Family, inputs: Arrays) -> dict[str, int]:
    """Sizes of the canonical roles read off the inputs (absent roles are 1)."""
    sizes: dict[str, int] = {}
    for name, array in inputs.items():
        if family.metamorphic is None or name not in family.metamorphic.roles:
            continue
        roles = roles_of(family, name)
        if len(roles) != np.ndim(array):
            raise ValueError(f"{family.name}: roles of {name!r} {roles} vs shape {array.shape}")
        for role, size in zip(roles, np.shape(array), strict=True):
            if role not in ROLES:
                continue
            known = sizes.setdefault(role, size)
            if known != size and min(known, size) != 1:  # size 1 broadcasts
                raise ValueError(
                    f"{family.name}: axis {role!r} is {known} in one input, {size} in {name!r}"
                )
            sizes[role] = max(known, size)
    sizes.setdefault("head", 1)
    sizes.setdefault("kv_head", sizes["head"])
    for role in ("batch", "query", "key"):
        sizes.setdefault(role, 1)
    if sizes["head"] % sizes["kv_head"]:
        raise ValueError(f"{family.name}: {sizes['kv_head']} kv heads do not divide "
                         f"{sizes['head']} heads")
    return sizes


def project(mask: np.ndarray, mask_roles: Sequence[str], roles: Sequence[str | None],
            shape: tuple[int, ...]) -> np.ndarray:
    """``mask`` (axes ``mask_roles``) laid out for an array with axis ``roles`` and ``shape``:
    missing roles broadcast, roles the array lacks are reduced with ``any``."""
    keep = [r for r in mask_roles if r in roles]
    drop = tuple(i for i, r in enumerate(mask_roles) if r not in roles)
    m = mask.any(axis=drop) if drop else mask
    m = np.transpose(m, [keep.index(r) for r in roles if r in keep]) if keep else m
    order = [r for r in roles if r in keep]
    expanded = m.reshape([m.shape[order.index(r)] if r in keep else 1 for r in roles])
    # A size-1 (broadcast) axis of the target holds every index of the mask's axis.
    squash = tuple(i for i, (a, b) in enumerate(zip(expanded.shape, shape, strict=True))
                   if a != b and b == 1)
    if squash:
        expanded = expanded.any(axis=squash, keepdims=True)
    return np.broadcast_to(expanded, shape)


def visibility(family: Family, case: Any, sizes: Mapping[str, int]) -> np.ndarray:
    """The hook's visibility broadcast to ``[batch, head, query, key]``."""
    vis = np.asarray(family.metamorphic.visible(case), bool)
    full = (sizes["batch"], sizes["head"], sizes["query"], sizes["key"])
    try:
        return np.broadcast_to(vis, full)
    except ValueError:
        raise ValueError(f"{family.name}: visible(case) has shape {vis.shape}, "
                         f"not broadcastable to [batch, head, query, key] {full}") from None


@dataclasses.dataclass(frozen=True)
class Influence:
    """Which output elements a perturbation may change: ``rows`` [batch, head, query],
    ``keys`` [batch, kv_head, key] and ``keys_by_head`` [batch, head, key]."""

    rows: np.ndarray
    keys: np.ndarray
    keys_by_head: np.ndarray

    def may_change(self, roles: Sequence[str | None], shape: tuple[int, ...]) -> np.ndarray:
        """Bool mask (broadcast to ``shape``) of an output's elements that may change
        (an output indexed by query and key, like a bias gradient, may change where
        its row or its key may)."""
        if "query" in roles and "key" in roles:
            by_row = project(self.rows, ROW_ROLES, roles, shape)
            no_query = tuple(r if r != "query" else None for r in roles)
            return by_row | self.may_change(no_query, shape)
        if "key" in roles or "kv_head" in roles:
            if "kv_head" in roles or "head" not in roles:
                return project(self.keys, KEY_ROLES, roles, shape)
            return project(self.keys_by_head, KEY_ROLES_BY_QHEAD, roles, shape)
        return project(self.rows, ROW_ROLES, roles, shape)


def influence(vis: np.ndarray, key_pert: np.ndarray, query_pert: np.ndarray,
              kv_heads: int) -> Influence:
    """What perturbing key positions ``key_pert`` [batch, key] and query positions
    ``query_pert`` [batch, query] may change, given visibility ``vis``.

    A row changes if it is perturbed or sees a perturbed key; a key's gradient
    changes if the key is perturbed or some changed row sees it.
    """
    b, h, q, k = vis.shape
    rows = query_pert[:, None, :] | (vis & key_pert[:, None, None, :]).any(axis=-1)
    by_head = (vis & rows[..., None]).any(axis=2) | key_pert[:, None, :]
    keys = by_head.reshape(b, kv_heads, h // kv_heads, k).any(axis=2)
    return Influence(rows=rows, keys=keys, keys_by_head=by_head)


def perturb(family: Family, case: Any, inputs: Arrays, *, key_pert: np.ndarray,
            query_pert: np.ndarray, stream: int) -> Arrays:
    """Fresh standard-normal values at the perturbed positions of every floating
    query-side and key-side input (all heads), then the hook's ``constrain``."""
    rng = case.rng(1000 + stream)
    out = dict(inputs)
    for name, array in inputs.items():
        if name not in family.metamorphic.roles or not is_float(array):
            continue
        roles = roles_of(family, name)
        if ("query" in roles) == ("key" in roles):
            continue
        pert, pert_roles = (query_pert, ("batch", "query")) if "query" in roles else (
            key_pert, ("batch", "key"))
        where = project(pert, pert_roles, roles, array.shape)
        fresh = standard_normal(rng, array.shape, str(array.dtype))
        out[name] = np.where(where, fresh, array).astype(array.dtype)
    return family.metamorphic.constrain(case, out)


def is_float(array: np.ndarray) -> bool:
    return np.issubdtype(array.dtype, np.floating) or array.dtype.name == "bfloat16"


def location(axes: Sequence[str], index: tuple[int, ...]) -> str:
    return " ".join(f"{a}={i}" for a, i in zip(axes, index, strict=False))


def differences(a: np.ndarray, b: np.ndarray, where: np.ndarray | None, threshold_rel: float
                ) -> tuple[int, float, tuple[int, ...] | None, float]:
    """Elements (within ``where``) whose values differ by more than ``threshold_rel``
    times ``a``'s scale: ``(count, largest difference / scale, worst index, scale)``.
    A NaN/Inf in one run only is an infinite difference."""
    a64 = np.asarray(a, np.float64)
    b64 = np.asarray(b, np.float64)
    finite = np.isfinite(a64)
    scale = max(float(np.max(np.abs(a64[finite]))) if finite.any() else 0.0, 1e-30)
    with np.errstate(invalid="ignore"):  # inf - inf is NaN, handled just below
        diff = np.abs(a64 - b64)
    same_nonfinite = (~np.isfinite(a64)) & (~np.isfinite(b64)) & (
        np.isnan(a64) == np.isnan(b64)) & ((a64 == b64) | np.isnan(a64))
    diff = np.where(same_nonfinite, 0.0, np.where(np.isnan(diff), np.inf, diff))
    if where is not None:
        diff = np.where(np.broadcast_to(where, diff.shape), diff, 0.0)
    if diff.size == 0:
        return 0, 0.0, None, scale
    worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape))
    count = int(np.count_nonzero(diff > threshold_rel * scale))
    return count, float(diff[worst]) / scale, worst, scale
