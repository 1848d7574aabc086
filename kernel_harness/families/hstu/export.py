"""Standalone repro source for one hstu case (``kernel-harness export-repro``).

The default kernel is the harness's own (``kernel_harness.kernels.hstu``), which a script
that runs without the harness cannot import: the script carries that package's source and
loads it as the module ``hstu_kernel``. ``--impl`` scripts import the named kernel instead.
"""

from __future__ import annotations

import inspect
import math
from importlib import resources

from kernel_harness.ops.attention.export import reference_source
from kernel_harness.ops.pointwise_attention.cases import BLOCK_FIELDS, HstuCase
from kernel_harness.ops.pointwise_attention.reference import pointwise_attention
from kernel_harness.records.export import ExportSnippet

#: The kernel package's modules in the order they import each other.
KERNEL_MODULES: tuple[str, ...] = ("forward", "planning", "backward", "api")
_PACKAGE = "kernel_harness.kernels.hstu"

_LOADER = '''
import sys
import types

# The hstu kernel's own source (kernel_harness.kernels.hstu), carried by this script.
HSTU_SOURCES = {sources}


def _load_hstu_kernel():
    package = types.ModuleType("hstu_kernel")
    package.__path__ = []
    sys.modules["hstu_kernel"] = package
    for name, source in HSTU_SOURCES.items():
        module = types.ModuleType(f"hstu_kernel.{{name}}")
        sys.modules[module.__name__] = module
        exec(compile(source, f"<hstu_kernel/{{name}}.py>", "exec"), module.__dict__)
        setattr(package, name, module)
    return package.api.hstu_attention


kernel = _load_hstu_kernel()
'''


def kernel_sources() -> dict[str, str]:
    """The kernel package's module sources, its imports renamed to ``hstu_kernel``."""
    files = resources.files(_PACKAGE)
    return {name: files.joinpath(f"{name}.py").read_text().replace(_PACKAGE + ".",
                                                                   "hstu_kernel.")
            for name in KERNEL_MODULES}


def default_import(sources: dict[str, str] | None = None) -> str:
    """Code binding ``kernel`` to ``hstu_attention`` from the carried ``sources``."""
    return _LOADER.format(sources=repr(kernel_sources() if sources is None else sources))


def export(case: HstuCase) -> ExportSnippet:
    """The call with the case's mask, window, segments, scale and blocks, and its reference
    (dense mask from the description, ``silu(scale q.k^T) / q_len``, exact zeros masked)."""
    kwargs = ", ".join(f"{n}={getattr(case, n)!r}" for n in BLOCK_FIELDS)
    segs = case.q_segments is not None
    seg_args = ('q_segment_ids=jnp.asarray(x["q_segment_ids"]), '
                'kv_segment_ids=jnp.asarray(x["kv_segment_ids"]), ') if segs else ""
    mask_arg = 'np.asarray(x["mask"], bool)' if case.mask == "numpy" else repr(case.mask)
    scale = case.scale if case.scale is not None else 1.0 / math.sqrt(case.head_dim)
    numpy_mask = 'np.asarray(x["mask"], bool)' if case.mask == "numpy" else "None"
    window = None if case.window is None else (case.window, case.window)
    segments = '(x["q_segment_ids"], x["kv_segment_ids"])' if segs else "None"
    run_kernel = f'''
        def run_kernel(x):
            def f(q, k, v):
                return kernel({mask_arg}, q, k, v, {seg_args}
                              sliding_window_size={case.window!r}, scale={case.scale!r},
                              {kwargs}, interpret=INTERPRET)

            q, k, v, do = (jnp.asarray(x[n]) for n in ("q", "k", "v", "do"))
            out, vjp = jax.vjp(f, q, k, v)
            grads = vjp(do.astype(out.dtype))
            return dict(zip(("out", "dq", "dk", "dv"), (out, *grads), strict=True))
    '''
    reference = reference_source(inspect.getsource(pointwise_attention) + f'''


def reference(x):
    """HSTU pointwise attention in float32, HIGHEST: (mask * silu(scale q.k^T) / q_len) v,
    masked entries exactly 0 (the ops' ``visibility`` and ``pointwise_attention`` above)."""
    vis = visibility({case.q_len}, {case.kv_len}, causal={case.mask == "causal"},
                     mask={numpy_mask}, window={window!r}, segments={segments}, xp=np)
    f32 = [jnp.asarray(x[n], jnp.float32) for n in ("q", "k", "v")]
    out, vjp = jax.vjp(lambda q, k, v: pointwise_attention(q, k, v, vis, {scale!r}), *f32)
    grads = vjp(jnp.asarray(x["do"], jnp.float32))
    return dict(zip(("out", "dq", "dk", "dv"), (out, *grads), strict=True))
''')
    return ExportSnippet(default_import=default_import(), run_kernel=run_kernel,
                         reference=reference, outputs=("out", "dq", "dk", "dv"))
