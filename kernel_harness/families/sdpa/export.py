"""Standalone repro source for one sdpa case (``kernel-harness export-repro``)."""

from __future__ import annotations

from kernel_harness.families.sdpa.cases import SdpaCase
from kernel_harness.ops.attention.export import call_source
from kernel_harness.ops.attention.record import definition
from kernel_harness.records.export import ExportSnippet

_DEFAULT = '''
def kernel(query, key, value, bias=None, mask=None, **options):
    return jax.nn.dot_product_attention(query, key, value, bias, mask,
                                        implementation="xla", **options)
'''


def export(case: SdpaCase) -> ExportSnippet:
    """The call with the case's exact options, and its reference (dense visibility built
    from the description: mask array, causal, window, sequence lengths)."""
    has_bias = case.bias is not None
    grads = ("dq", "dk", "dv", "dbias") if has_bias else ("dq", "dk", "dv")
    arrays = {n: f'jnp.asarray(x["{n}"])' if getattr(case, n) is not None else "None"
              for n in ("mask", "q_lengths", "kv_lengths")}
    args = "q, k, v, bias" if has_bias else "q, k, v"
    run_kernel = f'''
        OPTIONS = dict(scale={case.scale!r}, is_causal={case.is_causal},
                       local_window_size={case.window!r})


        @jax.jit
        def _kernel_fwd_bwd(x):
            def f({args}):
                return kernel(q, k, v, {"bias" if has_bias else "None"}, x.get("mask"),
                              query_seq_lengths=x.get("q_lengths"),
                              key_value_seq_lengths=x.get("kv_lengths"), **OPTIONS)

            out, vjp = jax.vjp(f, *(x[n] for n in {_names(has_bias)!r}))
            return dict(zip({("out", *grads)!r}, (out, *vjp(x["do"])), strict=True))


        def run_kernel(x):
            return _kernel_fwd_bwd(x)
    '''
    names = {"q": "query", "k": "key", "v": "value", "do": "do"} | (
        {"bias": "bias"} if has_bias else {})
    reference = call_source(
        definition(case), vis=f"visibility({case.q_len}, {case.kv_len}, "
        f"causal={case.is_causal}, window={case.window!r}, mask={arrays['mask']}, "
        f"q_lengths={arrays['q_lengths']}, kv_lengths={arrays['kv_lengths']})",
        arrays={op: f'x["{name}"]' for op, name in names.items()},
        outputs={n: n for n in ("out", *grads)},
        doc="Softmax attention in float32, HIGHEST; masked keys get exactly zero weight, "
        "rows that see no key (and padding rows) give 0. GQA: head n reads kv head "
        f"n // {case.q_heads // case.kv_heads}.")
    return ExportSnippet(default_import=_DEFAULT, run_kernel=run_kernel, reference=reference,
                         outputs=("out", *grads))


def _names(has_bias: bool) -> tuple[str, ...]:
    return ("query", "key", "value", "bias") if has_bias else ("query", "key", "value")
