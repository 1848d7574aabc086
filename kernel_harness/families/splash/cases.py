"""Splash attention cases: the description, its mask language, and the strategy drawing it.

A mask is a short string in a tiny expression language, one per head or one
shared by all heads::

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
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import math
from typing import Any, ClassVar

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from kernel_harness.case import Case, cast, standard_normal

#: Sequence lengths the strategy draws (multiples of the kernel's 128 lanes).
SEQ_LENS: tuple[int, ...] = (128, 256, 384, 512)
#: Block sizes must be multiples of this (the kernel's lane count).
LANES = 128
LAYOUTS: tuple[str, ...] = ("head_dim_minor", "seq_minor")
DTYPES: tuple[str, ...] = ("float32", "bfloat16")
HEAD_DIMS: tuple[int, ...] = (64, 128, 256)

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


def segment_ids(runs: tuple[tuple[int, int], ...]) -> np.ndarray:
    """Expands ``((id, length), ...)`` runs into an int32 id array."""
    return np.concatenate([np.full(n, i, np.int32) for i, n in runs])


def _divisors(n: int, cap: int | None = None) -> tuple[int, ...]:
    return tuple(b for b in range(LANES, (cap or n) + 1, LANES) if n % b == 0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SplashCase(Case):
    """One splash attention problem, described (not stored as arrays).

    Attributes:
      batch: examples, run through ``jax.vmap`` of the per-example kernel.
      num_q_heads, num_kv_heads: query and key/value heads; ``num_kv_heads``
        divides ``num_q_heads`` (equal: MHA, fewer: grouped). MQA has 1.
      mqa: use ``make_splash_mqa`` (k/v carry no head axis); needs num_kv_heads 1.
      q_len, kv_len: sequence lengths (multiples of 128).
      head_dim, head_dim_v: q/k and v head sizes.
      masks: one mask string shared by all heads, or one per query head.
      q_segments, kv_segments: run-length segment ids, both or neither.
      soft_cap: logits soft cap (``cap * tanh(logits / cap)``) or None.
      sinks: one learned sink logit per query head.
      block_*: the kernel's BlockSizes; ``block_q_dq``/``block_kv_dq`` are None
        exactly when ``fused_bwd`` (the fused dq+dkv backward kernel).
      q_layout, k_layout, v_layout: ``head_dim_minor`` or ``seq_minor``.
    """

    batch: int = 1
    num_q_heads: int = 1
    num_kv_heads: int = 1
    mqa: bool = False
    q_len: int = 128
    kv_len: int = 128
    head_dim: int = 128
    head_dim_v: int = 128
    masks: tuple[str, ...] = ("full",)
    q_segments: tuple[tuple[int, int], ...] | None = None
    kv_segments: tuple[tuple[int, int], ...] | None = None
    soft_cap: float | None = None
    sinks: bool = False
    block_q: int = 128
    block_kv: int = 128
    block_kv_compute: int = 128
    block_q_dkv: int = 128
    block_kv_dkv: int = 128
    block_kv_dkv_compute: int = 128
    block_q_dq: int | None = 128
    block_kv_dq: int | None = 128
    fused_bwd: bool = False
    q_layout: str = "head_dim_minor"
    k_layout: str = "head_dim_minor"
    v_layout: str = "head_dim_minor"

    DYNAMIC_FIELDS: ClassVar[frozenset[str]] = frozenset({"seed"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.dtype not in DTYPES:
            raise ValueError(f"splash runs {DTYPES}, not {self.dtype!r}")
        for name in ("batch", "num_q_heads", "num_kv_heads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.num_q_heads % self.num_kv_heads:
            raise ValueError(
                f"num_kv_heads={self.num_kv_heads} must divide num_q_heads={self.num_q_heads}"
            )
        if self.mqa and self.num_kv_heads != 1:
            raise ValueError("mqa=True needs num_kv_heads=1")
        for name in ("q_len", "kv_len"):
            n = getattr(self, name)
            if n < LANES or n % LANES:
                raise ValueError(f"{name}={n} must be a positive multiple of {LANES}")
        for name in ("head_dim", "head_dim_v"):
            if getattr(self, name) not in HEAD_DIMS:
                raise ValueError(f"{name} must be one of {HEAD_DIMS}")
        if len(self.masks) not in (1, self.num_q_heads):
            raise ValueError(
                f"masks: give 1 or num_q_heads={self.num_q_heads} specs, got {len(self.masks)}"
            )
        for spec in self.masks:
            parse_mask(spec)
        self._check_segments()
        if self.soft_cap is not None and not self.soft_cap > 0:
            raise ValueError("soft_cap must be > 0 or None")
        self._check_blocks()
        for name in ("q_layout", "k_layout", "v_layout"):
            if getattr(self, name) not in LAYOUTS:
                raise ValueError(f"{name} must be one of {LAYOUTS}")

    def _check_segments(self) -> None:
        if (self.q_segments is None) != (self.kv_segments is None):
            raise ValueError("give both q_segments and kv_segments, or neither")
        if self.q_segments is None:
            return
        for name, runs, n in (("q_segments", self.q_segments, self.q_len),
                              ("kv_segments", self.kv_segments, self.kv_len)):
            if not runs or any(len(r) != 2 or r[0] < 0 or r[1] < 1 for r in runs):
                raise ValueError(f"{name}: runs are (id >= 0, length >= 1) pairs")
            if sum(r[1] for r in runs) != n:
                raise ValueError(f"{name}: run lengths sum to {sum(r[1] for r in runs)}, not {n}")

    def _check_blocks(self) -> None:
        pairs = [("block_q", self.q_len), ("block_kv", self.kv_len),
                 ("block_q_dkv", self.q_len), ("block_kv_dkv", self.kv_len)]
        if self.fused_bwd:
            if self.block_q_dq is not None or self.block_kv_dq is not None:
                raise ValueError("fused_bwd=True: block_q_dq and block_kv_dq must be None")
        else:
            if self.block_q_dq is None or self.block_kv_dq is None:
                raise ValueError("fused_bwd=False needs block_q_dq and block_kv_dq")
            pairs += [("block_q_dq", self.q_len), ("block_kv_dq", self.kv_len)]
        pairs += [("block_kv_compute", self.block_kv),
                  ("block_kv_dkv_compute", self.block_kv_dkv)]
        for name, whole in pairs:
            b = getattr(self, name)
            if b < LANES or b % LANES or whole % b:
                raise ValueError(
                    f"{name}={b} must be a multiple of {LANES} dividing {whole}"
                )

    def head_masks(self) -> tuple[str, ...]:
        """The mask string of every query head."""
        return self.masks * self.num_q_heads if len(self.masks) == 1 else self.masks

    def materialize(self) -> dict[str, np.ndarray]:
        """q (pre-scaled by 1/sqrt(head_dim)), k, v, the cotangent ``do``, and when
        present ``sinks`` and the segment id arrays.

        k/v always carry a kv-head axis (size 1 for MQA). ``do`` is zero on rows
        that see no key when the case has no sinks (see the family contract).
        """
        from kernel_harness.families.splash.reference import empty_rows

        b, hq, hkv = self.batch, self.num_q_heads, self.num_kv_heads
        q = self.rng(0).standard_normal((b, hq, self.q_len, self.head_dim))
        out = {
            "q": cast(q / np.sqrt(self.head_dim), self.dtype),
            "k": standard_normal(self.rng(1), (b, hkv, self.kv_len, self.head_dim), self.dtype),
            "v": standard_normal(self.rng(2), (b, hkv, self.kv_len, self.head_dim_v), self.dtype),
        }
        do = self.rng(3).standard_normal((b, hq, self.q_len, self.head_dim_v))
        if not self.sinks:
            do = np.where(empty_rows(self)[None, :, :, None], 0.0, do)
        out["do"] = cast(do, self.dtype)
        if self.sinks:
            # Around a row's logsumexp (log of 1..512 keys), so the sink matters.
            out["sinks"] = self.rng(4).uniform(-2.0, 6.0, hq).astype(np.float32)
        if self.q_segments is not None:
            out["q_segment_ids"] = segment_ids(self.q_segments)
            out["kv_segment_ids"] = segment_ids(self.kv_segments)
        return out


# ---------------------------------------------------------------------------- strategy


def _chance(draw: st.DrawFn, p: float) -> bool:
    """True with probability ~p; shrinks to False."""
    return draw(st.integers(0, 99)) >= round(100 * (1 - p))


def _maybe(draw: st.DrawFn, setting: bool | None, p: float) -> bool:
    return _chance(draw, p) if setting is None else setting


def _pick(draw: st.DrawFn, weighted: tuple[tuple[str, int], ...]) -> str:
    """One option by integer weight (summing to 100); shrinks to the first option.

    Built from :func:`_chance` coins (whose rates hold in the first few dozen examples,
    unlike the middle of an integer range or ``sampled_from`` past its first element)."""
    remaining = sum(w for _, w in weighted)
    for option, weight in reversed(weighted[1:]):
        if _chance(draw, weight / remaining):
            return option
        remaining -= weight
    return weighted[0][0]


def _leaf_spec(draw: st.DrawFn, kind: str, q_len: int, kv_len: int, safe: bool) -> str:
    """One leaf mask string; parameters favour block edges and off-by-one neighbours.

    ``safe``: keep every query row seeing at least one key, and rows seeing a single
    key a minority (a diagonal-only mask has identically zero dq and dk).
    """
    ints = st.integers
    if kind == "full":
        return "full"
    if kind == "causal":
        offsets = [0, max(kv_len - q_len, 0), 1, 127, 128, 129] + ([] if safe else [-1, -128])
        off = draw(st.sampled_from(offsets) | ints(0 if safe else -q_len // 2, kv_len))
        return f"causal(offset={off})"
    if kind == "local":
        edges = [0, 1, 127, 128, 129, 255, 256]
        left = draw(st.sampled_from([*edges, None]) | ints(0, kv_len))
        right = draw(st.sampled_from([0, None, *edges[1:]]) | ints(0, kv_len))
        if left is None and right is None:
            right = 0
        if left == 0 and right == 0:
            left = 1
        off = draw(st.sampled_from([0, kv_len - q_len, 1, -1]) | ints(-64, 64))
        if safe:  # first row's window must reach key 0, last row's key kv_len - 1
            if left is not None and right is not None and left + right < q_len - kv_len:
                left = q_len - kv_len - right
            lo = -math.inf if right is None else -right
            hi = math.inf if left is None else kv_len - q_len + left
            off = int(min(max(off, lo), hi))
        return f"local(left={left}, right={right}, offset={off})"
    if kind == "chunked":
        chunk = draw(st.sampled_from([128, 64, 127, 129, 256, 2]) | ints(2, q_len))
        if safe and (q_len - 1) // chunk * chunk > kv_len - 1:
            chunk = q_len
        return f"chunked(chunk={chunk})"
    if kind == "random":
        density = draw(st.sampled_from([0.5, 0.15, 0.9]))
        return f"random(seed={draw(ints(0, 999))}, density={density})"
    if kind == "boxes":
        return f"boxes(seed={draw(ints(0, 999))}, count={draw(ints(1, 6))})"
    raise ValueError(kind)


def _computable_kind(draw: st.DrawFn, kinds: list[str]) -> str:
    """causal, local or chunked; local (the most edges) the most often."""
    weights = {"causal": 30, "local": 50, "chunked": 20}
    picked = _pick(draw, tuple((k, weights[k]) for k in ("causal", "local", "chunked")))
    return picked if picked in kinds else kinds[0]


def _mask_spec(draw: st.DrawFn, kinds: tuple[str, ...], q_len: int, kv_len: int,
               safe: bool) -> str:
    """A mask string: full, one computable leaf (the kernel's mask-function path), a
    numpy mask (partial mask blocks), or ``&``/``|`` of two leaves."""
    computable = [k for k in kinds if k in COMPUTABLE_KINDS]
    arrays = [k for k in kinds if k in NUMPY_KINDS]
    shape = _pick(draw, (("computable", 48), ("full", 8), ("numpy", 24), ("combo", 20)))
    if shape == "full" and "full" in kinds:
        return "full"
    if shape == "computable" and computable:
        return _leaf_spec(draw, _computable_kind(draw, computable), q_len, kv_len, safe)
    if shape == "numpy" and (arrays or computable):
        if computable and (not arrays or draw(st.booleans())):
            leaf = _leaf_spec(draw, _computable_kind(draw, computable), q_len, kv_len, safe)
            return f"numpy({leaf})"
        return _leaf_spec(draw, draw(st.sampled_from(arrays)), q_len, kv_len, safe)
    non_full = [k for k in kinds if k != "full"] or list(kinds)
    op = "|" if _chance(draw, 0.35) else "&"
    # An intersection keeps rows non-empty more often when one side is structured.
    if op == "&" and computable:
        a = _leaf_spec(draw, _computable_kind(draw, computable), q_len, kv_len, safe)
    else:
        a = _leaf_spec(draw, draw(st.sampled_from(non_full)), q_len, kv_len, safe)
    b = _leaf_spec(draw, draw(st.sampled_from(non_full)), q_len, kv_len, safe)
    return f"{a} {op} {b}"


def _runs(draw: st.DrawFn, length: int, ids: list[int] | None) -> tuple[tuple[int, int], ...]:
    """Run-length segment ids: 2-6 runs, often a length-1 run, ids sorted or not."""
    n = draw(st.integers(2, 6))
    cuts = set(draw(st.lists(st.integers(1, length - 1), min_size=n - 1, max_size=n - 1,
                             unique=True)))
    if _chance(draw, 0.5):  # a length-1 segment somewhere, often at an end
        at = draw(st.sampled_from([1, length - 1]) | st.integers(1, length - 2))
        cuts |= {at, at + 1} if at + 1 < length else {at}
    bounds = [0, *sorted(cuts), length]
    lengths = [b - a for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    if ids is None:
        if _chance(draw, 0.5):
            ids_seq = list(range(len(lengths)))
        else:
            ids_seq = draw(st.lists(st.integers(0, 3), min_size=len(lengths),
                                    max_size=len(lengths)))
    else:
        ids_seq = draw(st.lists(st.sampled_from(ids), min_size=len(lengths),
                                max_size=len(lengths)))
    return tuple(zip(ids_seq, lengths, strict=True))


def _run_lengths(ids: np.ndarray) -> tuple[tuple[int, int], ...]:
    edges = [0, *(np.flatnonzero(np.diff(ids)) + 1).tolist(), len(ids)]
    return tuple((int(ids[a]), b - a) for a, b in zip(edges[:-1], edges[1:], strict=True))


def _aligned(draw: st.DrawFn, q_runs: tuple[tuple[int, int], ...],
             kv_len: int) -> tuple[tuple[int, int], ...]:
    """kv ids equal to the q ids position by position (packed self-attention); a longer
    kv sequence continues with runs of ids the queries use."""
    q_ids = segment_ids(q_runs)
    if kv_len <= len(q_ids):
        kv_ids = q_ids[:kv_len].copy()
        missing = sorted(set(q_ids.tolist()) - set(kv_ids.tolist()))
        if missing:  # the last keys carry the ids only late queries use
            kv_ids[kv_len - len(missing):] = missing
        return _run_lengths(kv_ids)
    tail = segment_ids(_runs(draw, kv_len - len(q_ids) + 2, sorted({i for i, _ in q_runs})))
    return _run_lengths(np.concatenate([q_ids, tail[: kv_len - len(q_ids)]]))


def _key_counts(masks: tuple[str, ...], q_len: int, kv_len: int,
                q_segs: Any = None, kv_segs: Any = None) -> np.ndarray:
    from kernel_harness.families.splash.reference import _allowed

    return _allowed((masks, q_len, kv_len, q_segs, kv_segs)).sum(axis=-1)


def acceptable(counts: np.ndarray, sinks: bool, max_empty: float) -> bool:
    """Whether per-row visible-key ``counts`` make a well-posed case: no row sees
    nothing unless there are sinks (then at most ``max_empty`` of them), and at
    least half the rows see two keys or more (else dq and dk are nearly zero)."""
    empty = float((counts == 0).mean())
    ok_empty = empty <= max_empty if sinks else empty == 0
    return ok_empty and float((counts >= 2).mean()) >= 0.5


def _blocks(draw: st.DrawFn, length: int, p_large: float = 0.4) -> int:
    """A block size dividing ``length``: 128 (the most blocks) unless, with probability
    ``p_large``, a larger divisor."""
    divisors = _divisors(length)
    if len(divisors) == 1 or not _chance(draw, p_large):
        return divisors[0]
    return draw(st.sampled_from(divisors[1:]))


def _kv_blocks(draw: st.DrawFn, length: int, p_split: float) -> tuple[int, int]:
    """A kv block and its compute block. With probability about ``p_split`` (and always
    when shrunk) a block of several 128-wide compute blocks, the in-kernel sub-block
    loop; otherwise 128 (the most kv blocks)."""
    # Prefer (shrink to) a block that still leaves several kv blocks: 256 of 512.
    larger = sorted(_divisors(length)[1:], key=lambda b: (length // b < 2, b))
    if not larger or _chance(draw, 1 - p_split):
        return LANES, LANES
    block = draw(st.sampled_from(larger))
    return block, draw(st.sampled_from(_divisors(block)[:-1]))


@st.composite
def splash_cases(
    draw: st.DrawFn,
    *,
    dtypes: tuple[str, ...] = DTYPES,
    seq_lens: tuple[int, ...] = SEQ_LENS,
    heads: str | None = None,
    mask_kinds: tuple[str, ...] = LEAF_KINDS,
    per_head_masks: bool | None = None,
    segments: bool | None = None,
    soft_cap: bool | None = None,
    sinks: bool | None = None,
    max_batch: int = 2,
    max_empty_row_fraction: float = 0.25,
) -> SplashCase:
    """Draws a :class:`SplashCase` reaching the kernel's hard paths.

    Keyword options pin a feature (True/False) or leave it drawn (None);
    ``heads`` is one of ``mha``, ``gqa``, ``mqa`` or None; ``mask_kinds`` limits
    the leaf kinds. Rows that see no key occur only with sinks (at most
    ``max_empty_row_fraction`` of them). Shrinks towards one float32 MHA head,
    512x512, ``causal(offset=0)``, no segments/cap/sinks, 128 query blocks, 256 kv
    blocks of 128 compute blocks, the split backward and head-dim-minor layouts.
    """
    dtype = draw(st.sampled_from(dtypes))
    kind = heads or _pick(draw, (("mha", 26), ("gqa", 40), ("mqa", 34)))
    if kind == "mha":
        hq = hkv = draw(st.sampled_from([1, 2, 3]))
    elif kind == "gqa":
        hq, hkv = draw(st.sampled_from([(4, 2), (6, 3), (6, 2)]))
    elif kind == "mqa":
        hq, hkv = draw(st.sampled_from([2, 1, 4])), 1
    else:
        raise ValueError(f"heads must be mha, gqa, mqa or None, got {heads!r}")
    # Longest first: 512 holds several kv blocks of several compute blocks each.
    longer = sorted((n for n in seq_lens if n > LANES), reverse=True) or list(seq_lens)
    q_len = draw(st.sampled_from(seq_lens) if _chance(draw, 0.2) else st.sampled_from(longer))
    kv_len = draw(st.sampled_from(seq_lens)) if _chance(draw, 0.5) else q_len
    head_dim = 64 if _chance(draw, 0.2) else 128
    head_dim_v = draw(st.sampled_from(HEAD_DIMS)) if _chance(draw, 0.2) else head_dim
    has_sinks = _maybe(draw, sinks, 0.45)
    cap = draw(st.sampled_from([2.5, 1.0, 10.0, 0.5])) if _maybe(draw, soft_cap, 0.45) else None

    seg_options: list[Any] = [(None, None)]
    if _maybe(draw, segments, 0.6):
        q_segs = _runs(draw, q_len, None)
        seg_options = [(q_segs, _aligned(draw, q_segs, kv_len))]
        if _chance(draw, 0.4):  # kv ids drawn on their own: true cross-segment attention
            seg_options.insert(0, (q_segs, _runs(draw, kv_len, sorted({i for i, _ in q_segs}))))

    def draw_masks() -> tuple[str, ...]:
        n = hq if hq > 1 and _maybe(draw, per_head_masks, 0.15) else 1
        return tuple(_mask_spec(draw, mask_kinds, q_len, kv_len, not has_sinks)
                     for _ in range(n))

    def ok(masks: tuple[str, ...], segs: Any) -> bool:
        counts = _key_counts(masks, q_len, kv_len, *segs)
        return acceptable(counts, has_sinks, max_empty_row_fraction)

    # A few tries at a mask under which every row sees keys; then simpler segments;
    # then the full mask (aligned segments always leave every row a key under it).
    tries = [(segs, draw_masks) for segs in seg_options for _ in range(3)]
    tries.append((seg_options[-1], lambda: ("full",)))
    for segs, make in tries:
        masks = make()
        if ok(masks, segs):
            break
    assume(ok(masks, segs))
    q_segs, kv_segs = segs

    # In-kernel masks (one computable mask for all heads) are where sub-block offsets
    # matter: give them compute blocks smaller than kv blocks nearly always.
    in_kernel = len(set(masks)) == 1 and parse_mask(masks[0]).kind in COMPUTABLE_KINDS
    p_split = 0.95 if in_kernel else 0.7
    block_q, (block_kv, block_kv_compute) = (
        _blocks(draw, q_len), _kv_blocks(draw, kv_len, p_split))
    block_q_dkv, (block_kv_dkv, block_kv_dkv_compute) = (
        _blocks(draw, q_len), _kv_blocks(draw, kv_len, p_split))
    fused = draw(st.booleans())
    layouts = [LAYOUTS[1] if _chance(draw, 0.25) else LAYOUTS[0] for _ in range(3)]
    case = SplashCase(
        dtype=dtype,
        seed=draw(st.integers(0, 2**31 - 1)),
        batch=draw(st.integers(1, max_batch)),
        num_q_heads=hq, num_kv_heads=hkv, mqa=kind == "mqa",
        q_len=q_len, kv_len=kv_len, head_dim=head_dim, head_dim_v=head_dim_v,
        masks=masks, q_segments=q_segs, kv_segments=kv_segs, soft_cap=cap, sinks=has_sinks,
        block_q=block_q, block_kv=block_kv, block_kv_compute=block_kv_compute,
        block_q_dkv=block_q_dkv, block_kv_dkv=block_kv_dkv,
        block_kv_dkv_compute=block_kv_dkv_compute,
        block_q_dq=None if fused else _blocks(draw, q_len),
        block_kv_dq=None if fused else _blocks(draw, kv_len),
        fused_bwd=fused,
        q_layout=layouts[0], k_layout=layouts[1], v_layout=layouts[2],
    )
    return case
