"""Standalone repro source for one splash case (``kernel-harness export-repro``).

The kernel's masks are written as splash mask objects from the case's mask strings
(seeded numpy masks travel in the .npz); the reference reads the dense mask built by the
harness's own index formulas (``allowed`` in the .npz: the mask language is too long to
restate in a short script), never splash's masks or mask info, and computes the family's
contract on the attention op (the op's program embedded verbatim and run under
:func:`kernel_harness.ops.attention.record.definition`:
:func:`kernel_harness.ops.attention.export.call_source`).
"""

from __future__ import annotations

from kernel_harness.families.splash.cases import SplashCase
from kernel_harness.ops.attention.export import call_source
from kernel_harness.ops.attention.masks import MaskExpr, numpy_pattern, parse_mask
from kernel_harness.ops.attention.record import definition
from kernel_harness.records.export import ExportSnippet

_LAYOUTS = {"head_dim_minor": "HEAD_DIM_MINOR", "seq_minor": "SEQ_MINOR"}


def _mask_source(expr: MaskExpr, shape: str, arrays: dict, key: str) -> str:
    if expr.kind in ("and", "or"):
        a, b = (_mask_source(c, shape, arrays, f"{key}{i}") for i, c in enumerate(expr.children))
        return f"ml.{'LogicalAnd' if expr.kind == 'and' else 'LogicalOr'}({a}, {b})"
    if expr.kind == "numpy":
        inner = _mask_source(expr.children[0], shape, arrays, key + "n")
        return f"ml.NumpyMask(np.asarray({inner}[0:{shape}[0], 0:{shape}[1]], dtype=bool))"
    p = dict(expr.params)
    if expr.kind in ("random", "boxes"):
        return f'ml.NumpyMask(x["{key}"])'
    if expr.kind == "full":
        return f"ml.FullMask({shape})"
    if expr.kind == "causal":
        return f"ml.CausalMask({shape}, offset={p['offset']})"
    if expr.kind == "local":
        return f"ml.LocalMask({shape}, window_size=({p['left']}, {p['right']}), " \
               f"offset={p['offset']})"
    if expr.kind == "chunked":
        return f"ml.ChunkedCausalMask({shape}, chunk_size={p['chunk']})"
    raise ValueError(f"unknown mask kind {expr.kind!r}")


def _numpy_leaves(expr: MaskExpr, shape: tuple[int, int], arrays: dict, key: str) -> None:
    if expr.kind in ("random", "boxes"):
        arrays[key] = numpy_pattern(expr, shape)
    for i, c in enumerate(expr.children):
        _numpy_leaves(c, shape, arrays, key + ("n" if expr.kind == "numpy" else str(i)))


def export(case: SplashCase) -> ExportSnippet:
    """The kernel call with the case's masks, blocks, layouts and options, and its reference."""
    shape = (case.q_len, case.kv_len)
    # One segment layout serves every batch row: row 0's visibility is every row's.
    arrays: dict = {"allowed": case.visible()[0]}
    specs = sorted(set(case.head_masks()))
    masks = []
    for i, spec in enumerate(specs):
        expr = parse_mask(spec)
        _numpy_leaves(expr, shape, arrays, f"mask{i}_")
        masks.append(f"{_mask_source(expr, 'SHAPE', arrays, f'mask{i}_')},  # {spec}")
    heads = ", ".join(f"MASKS[{specs.index(s)}]" for s in case.head_masks())
    segs = case.q_segments is not None
    blocks = ", ".join(f"{n}={getattr(case, n)}" for n in (
        "block_q", "block_kv", "block_kv_compute", "block_q_dkv", "block_kv_dkv",
        "block_kv_dkv_compute", "block_q_dq", "block_kv_dq"))
    layouts = ", ".join(f"{n}=sk.QKVLayout.{_LAYOUTS[getattr(case, n)]}"
                        for n in ("q_layout", "k_layout", "v_layout"))
    mqa = "k, v = k[:, 0], v[:, 0]  # MQA: one kv head, no head axis" if case.mqa else "pass"
    nl = "\n" + " " * 16
    run_kernel = f'''
        import functools
        import importlib
        import sys
        from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sk
        from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as ml

        _target = kernel
        while isinstance(_target, functools.partial):
            _target = _target.func
        _own = sys.modules[_target.__module__]  # a copy of splash brings its own BlockSizes etc.
        if all(hasattr(_own, n) for n in ("BlockSizes", "QKVLayout", "SegmentIds")):
            sk = _own
            _package = _own.__name__.rpartition(".")[0]
            try:  # ... and its own mask classes, next to it (a top-level module has no package)
                if _package:
                    ml = importlib.import_module(_package + ".splash_attention_mask")
            except ImportError:
                pass
        SHAPE = {shape!r}


        def make_masks(x):  # one per distinct mask string; seeded numpy masks from the .npz
            return [
                {nl.join(masks)}
            ]
        BLOCKS = sk.BlockSizes({blocks},
                               use_fused_bwd_kernel={case.fused_bwd}, {layouts})


        def run_kernel(x):
            MASKS = make_masks(x)  # noqa: N806
            mha = ml.MultiHeadMask(({heads},))
            make = lambda residuals: kernel(  # noqa: E731
                mha, block_sizes=BLOCKS, is_mqa={case.mqa}, save_residuals=residuals,
                attn_logits_soft_cap={case.soft_cap!r}, head_shards=1, q_seq_shards=1,
                interpret=INTERPRET)
            plain, with_lse = make(False), make(True)
            segs = {"sk.SegmentIds(q=x['q_segment_ids'], kv=x['kv_segment_ids'])" if segs else None}

            def batched(kern, q, k, v, sinks):  # the kernel takes one example: vmap the batch
                return jax.vmap(lambda q1, k1, v1: kern(q1, k1, v1, segs, sinks))(q, k, v)

            @jax.jit
            def program(q, k, v, do, sinks):
                {mqa}
                out = batched(plain, q, k, v, sinks)
                lse = batched(with_lse, q, k, v, sinks)[1][0]
                if sinks is None:
                    _, vjp = jax.vjp(lambda q, k, v: batched(plain, q, k, v, None), q, k, v)
                    grads = dict(zip(("dq", "dk", "dv"), vjp(do), strict=True))
                else:
                    _, vjp = jax.vjp(lambda *a: batched(plain, *a), q, k, v, sinks)
                    grads = dict(zip(("dq", "dk", "dv", "dsinks"), vjp(do), strict=True))
                if {case.mqa}:
                    grads["dk"], grads["dv"] = grads["dk"][:, None], grads["dv"][:, None]
                return dict(out=out, lse=lse, **grads)

            return program(x["q"], x["k"], x["v"], x["do"], x.get("sinks"))
    '''
    # The attention op's program, verbatim, run under the family's own contract.
    reference = call_source(
        definition(case), vis='jnp.asarray(x["allowed"])[None]',
        arrays={n: f'x["{n}"]' for n in ("q", "k", "v", "do")}
        | ({"sinks": 'x["sinks"]'} if case.sinks else {}),
        outputs={n: n for n in ("out", "lse", "dq", "dk", "dv")}
        | ({"dsinks": "dsinks"} if case.sinks else {}),
        doc="Splash's contract on the attention op, in float32 at HIGHEST; q is already "
        "scaled by 1/sqrt(d). x['allowed']: [q_heads, q_len, kv_len], the mask from the case "
        "description.")
    outputs = ("out", "lse", "dq", "dk", "dv") + (("dsinks",) if case.sinks else ())
    return ExportSnippet(
        default_import="from jax.experimental.pallas.ops.tpu.splash_attention."
        "splash_attention_kernel import make_splash_mha as kernel",
        run_kernel=run_kernel, reference=reference, outputs=outputs, arrays=arrays,
    )
