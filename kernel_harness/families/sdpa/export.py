"""Standalone repro source for one sdpa case (``kernel-harness export-repro``)."""

from __future__ import annotations

from kernel_harness.families.sdpa.cases import SdpaCase
from kernel_harness.ops.attention.export import reference_source
from kernel_harness.spec.export import ExportSnippet

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
    reference = reference_source(f'''
        def reference(x):
            """Softmax attention in float32, HIGHEST; masked keys get exactly zero weight,
            rows that see no key (and padding rows) give 0. GQA: head n reads kv head
            n // {case.heads // case.kv_heads}."""
            vis = visibility({case.q_len}, {case.kv_len}, causal={case.is_causal},
                             window={case.window!r}, mask={arrays["mask"]},
                             q_lengths={arrays["q_lengths"]},
                             kv_lengths={arrays["kv_lengths"]})
            f32 = {{n: jnp.asarray(x[n], jnp.float32) for n in {_names(has_bias)!r}}}

            def attention({args}):
                return softmax_attention(q, k, v, {"bias" if has_bias else "None"}, vis,
                                         {case.effective_scale!r}, layout="bqhd")

            out, vjp = jax.vjp(attention, *f32.values())
            grads = vjp(jnp.asarray(x["do"], jnp.float32))
            return dict(zip({("out", *grads)!r}, (out, *grads), strict=True))
    ''')
    return ExportSnippet(default_import=_DEFAULT, run_kernel=run_kernel, reference=reference,
                         outputs=("out", *grads))


def _names(has_bias: bool) -> tuple[str, ...]:
    return ("query", "key", "value", "bias") if has_bias else ("query", "key", "value")
