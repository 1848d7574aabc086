"""The attention op's mask language, and the dense masks built from it by index formulas.

A mask is a short string in a tiny expression language (splash states its masks in it,
one per head or one shared by all heads)::

    full                              every query sees every key
    causal(offset=0)                  key <= query + offset
    local(left=64, right=0, offset=0) query + offset - left <= key <= query + offset + right
                                      (left/right None: unbounded on that side)
    chunked(chunk=128)                same chunk (index // chunk) and key <= query
    random(seed=3, density=0.5)       element-wise Bernoulli(density) numpy mask
    boxes(seed=3, count=4)            numpy mask: the query range cut into ``count``
                                      row bands, each seeing one random key interval
    numpy(causal(offset=1))           the inner mask handed to the kernel as a dense
                                      numpy array (the partial-mask-block path)
    a & b,  a | b                     logical and / or of two masks

Segments are run-length tuples of ``(segment id, run length)``, e.g.
``((2, 2), (0, 3), (1, 1), (2, 1))`` is the id sequence ``[2, 2, 0, 0, 0, 1, 2]``.

Nothing here uses a kernel's own masks or mask info: the reference, the strategy
and the metamorphic hooks all see the mask a case describes through these formulas, each
leaf built by the attention op's one dense-mask builder
(:func:`kernel_harness.ops.attention.reference.visibility`); :func:`visible_keys` adds
segment ids.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
from typing import Any

import numpy as np

from kernel_harness.ops.attention.reference import visibility
from kernel_harness.ops.attention.segments import segment_ids

_LEAF_PARAMS: dict[str, tuple[str, ...]] = {
    "full": (),
    "causal": ("offset",),
    "local": ("left", "right", "offset"),
    "chunked": ("chunk",),
    "random": ("seed", "density"),
    "boxes": ("seed", "count"),
}
LEAF_KINDS: tuple[str, ...] = tuple(_LEAF_PARAMS)
#: Leaves that are numpy arrays by definition (their data comes from a seed).
NUMPY_KINDS: frozenset[str] = frozenset({"random", "boxes"})
#: Leaves splash can compute inside the kernel (its mask-function path).
COMPUTABLE_KINDS: frozenset[str] = frozenset({"causal", "local", "chunked"})


@dataclasses.dataclass(frozen=True)
class MaskExpr:
    """A parsed mask: a leaf ``kind`` with ``params``, ``numpy`` of one child, or
    ``and``/``or`` of two children."""

    kind: str
    params: tuple[tuple[str, Any], ...] = ()
    children: tuple[MaskExpr, ...] = ()

    def param(self, name: str) -> Any:
        return dict(self.params)[name]

    def leaves(self) -> tuple[MaskExpr, ...]:
        """Every leaf of the expression, left to right."""
        if not self.children:
            return (self,)
        return tuple(leaf for c in self.children for leaf in c.leaves())


def _literal(node: ast.expr, spec: str) -> Any:
    if isinstance(node, ast.Constant) and (node.value is None or type(node.value) in (int, float)):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _literal(node.operand, spec)
        if inner is not None:
            return -inner
    raise ValueError(f"mask {spec!r}: parameters must be numbers or None, got {ast.unparse(node)}")


def _build(node: ast.expr, spec: str) -> MaskExpr:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd | ast.BitOr):
        kind = "and" if isinstance(node.op, ast.BitAnd) else "or"
        return MaskExpr(kind, (), (_build(node.left, spec), _build(node.right, spec)))
    if isinstance(node, ast.Name):
        node = ast.Call(func=node, args=[], keywords=[])
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        raise ValueError(f"mask {spec!r}: cannot read {ast.unparse(node)!r}")
    name = node.func.id
    if name == "numpy":
        if len(node.args) != 1 or node.keywords:
            raise ValueError(f"mask {spec!r}: numpy(...) takes exactly one mask")
        return MaskExpr("numpy", (), (_build(node.args[0], spec),))
    if name not in _LEAF_PARAMS:
        raise ValueError(
            f"mask {spec!r}: unknown kind {name!r}; known: {', '.join(_LEAF_PARAMS)}, numpy"
        )
    if node.args:
        raise ValueError(f"mask {spec!r}: {name}(...) takes keyword parameters only")
    given = {kw.arg: _literal(kw.value, spec) for kw in node.keywords}
    wanted = _LEAF_PARAMS[name]
    defaults = {"offset": 0, "left": None, "right": None}
    missing = [p for p in wanted if p not in given and p not in defaults]
    unknown = sorted(set(given) - set(wanted))
    if missing or unknown:
        raise ValueError(
            f"mask {spec!r}: {name} takes {wanted}; missing {missing}, unknown {unknown}"
        )
    return MaskExpr(name, tuple((p, given.get(p, defaults.get(p))) for p in wanted))


@functools.lru_cache(maxsize=1024)
def parse_mask(spec: str) -> MaskExpr:
    """Parses a mask string (see the module docstring); bad input is a clear ValueError."""
    try:
        tree = ast.parse(spec, mode="eval")
    except SyntaxError as e:
        raise ValueError(f"mask {spec!r} is not a valid mask expression: {e.msg}") from None
    expr = _build(tree.body, spec)
    _check_expr(expr, spec)
    return expr


def _check_expr(expr: MaskExpr, spec: str) -> None:
    for leaf in expr.leaves():
        p = dict(leaf.params)
        ints = [k for k, v in p.items() if k != "density" and v is not None and type(v) is not int]
        if ints:
            raise ValueError(f"mask {spec!r}: {leaf.kind} parameters {ints} must be integers")
        if leaf.kind == "local" and p["left"] is None and p["right"] is None:
            raise ValueError(f"mask {spec!r}: local needs left or right (both None is 'full')")
        if leaf.kind == "local" and any(p[s] is not None and p[s] < 0 for s in ("left", "right")):
            raise ValueError(f"mask {spec!r}: local window sides must be >= 0")
        if leaf.kind == "chunked" and p["chunk"] < 1:
            raise ValueError(f"mask {spec!r}: chunk must be >= 1")
        if leaf.kind == "random" and not 0 < float(p["density"]) <= 1:
            raise ValueError(f"mask {spec!r}: density must be in (0, 1]")
        if leaf.kind == "boxes" and p["count"] < 1:
            raise ValueError(f"mask {spec!r}: count must be >= 1")
    if expr.kind == "numpy" and expr.children[0].kind in ("numpy",):
        raise ValueError(f"mask {spec!r}: numpy(numpy(...)) is redundant")


def numpy_pattern(leaf: MaskExpr, shape: tuple[int, int]) -> np.ndarray:
    """The dense boolean array of a seeded numpy leaf (``random``/``boxes``).

    These masks ARE their array; kernel adapter and reference both take it from
    here, deterministically from the seed.
    """
    q_len, kv_len = shape
    rng = np.random.default_rng((leaf.param("seed"), 7919))
    if leaf.kind == "random":
        return rng.random(shape) < float(leaf.param("density"))
    if leaf.kind == "boxes":
        count = min(leaf.param("count"), q_len)
        cuts = np.sort(rng.choice(np.arange(1, q_len), size=count - 1, replace=False))
        bounds = [0, *cuts.tolist(), q_len]
        out = np.zeros(shape, bool)
        for r0, r1 in zip(bounds[:-1], bounds[1:], strict=True):
            c0 = int(rng.integers(0, kv_len))
            c1 = int(rng.integers(c0 + 1, kv_len + 1))
            out[r0:r1, c0:c1] = True
        return out
    raise ValueError(f"{leaf.kind!r} is not a numpy mask leaf")


def dense_mask(expr: MaskExpr, shape: tuple[int, int]) -> np.ndarray:
    """The [q_len, kv_len] boolean mask of a parsed mask expression."""
    if expr.kind == "and":
        return dense_mask(expr.children[0], shape) & dense_mask(expr.children[1], shape)
    if expr.kind == "or":
        return dense_mask(expr.children[0], shape) | dense_mask(expr.children[1], shape)
    if expr.kind == "numpy":
        return dense_mask(expr.children[0], shape)
    if expr.kind in ("random", "boxes"):
        return numpy_pattern(expr, shape)
    p = dict(expr.params)
    if expr.kind == "full":
        return np.ones(shape, bool)
    if expr.kind == "causal":
        vis = visibility(*shape, causal=True, q_offset=p["offset"], xp=np)
    elif expr.kind == "local":
        vis = visibility(*shape, window=(p["left"], p["right"]), q_offset=p["offset"], xp=np)
    elif expr.kind == "chunked":
        vis = visibility(*shape, causal=True, chunk=p["chunk"], xp=np)
    else:
        raise ValueError(f"unknown mask kind {expr.kind!r}")
    return vis[0, 0]


@functools.lru_cache(maxsize=256)
def visible_keys(key: tuple[Any, ...]) -> np.ndarray:
    """``[heads, q_len, kv_len]`` visibility of ``(head masks, q_len, kv_len, q segment
    runs, kv segment runs)``: the static masks AND equal segment ids (cached)."""
    masks, q_len, kv_len, q_segs, kv_segs = key
    by_spec = {s: dense_mask(parse_mask(s), (q_len, kv_len)) for s in set(masks)}
    allowed = np.stack([by_spec[s] for s in masks])
    if q_segs is not None:
        allowed = allowed & visibility(q_len, kv_len, segments=(
            segment_ids(q_segs)[None], segment_ids(kv_segs)[None]), xp=np)[0]
    allowed.setflags(write=False)
    return allowed
