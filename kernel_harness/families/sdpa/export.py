"""Standalone repro source for one sdpa case (``kernel-harness export-repro``)."""

from __future__ import annotations

from kernel_harness.families.sdpa.cases import SdpaCase
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
    vis = [f"vis = np.ones(({case.batch}, {case.heads}, {case.q_len}, {case.kv_len}), bool)"]
    positional = case.is_causal or case.window is not None
    if positional or case.kv_lengths is not None:
        vis.insert(0, f"s = np.arange({case.kv_len})[None, :]")
    if positional or case.q_lengths is not None:
        vis.insert(0, f"t = np.arange({case.q_len})[:, None]")
    if case.mask is not None:
        vis.append('vis = vis & x["mask"]')
    if case.is_causal:
        vis.append("vis = vis & (s <= t)  # causal, top-left")
    if case.window is not None:
        left, right = case.window
        vis.append(f"vis = vis & (s >= t - {left}) & (s <= t + {right})  # local window")
    if case.kv_lengths is not None:
        vis.append('vis = vis & (s < x["kv_lengths"][:, None, None, None])')
    if case.q_lengths is not None:
        vis.append('vis = vis & (t < x["q_lengths"][:, None, None, None])  # padding rows')
    vis_src = ("\n" + " " * 12).join(vis)
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
    reference = f'''
        def reference(x):
            """Softmax attention in float32, HIGHEST; masked keys get exactly zero weight,
            rows that see no key (and padding rows) give 0. GQA: head n reads kv head
            n // {case.heads // case.kv_heads}."""
            {vis_src}
            f32 = {{n: jnp.asarray(x[n], jnp.float32) for n in {_names(has_bias)!r}}}

            def attention({args}):
                k = jnp.repeat(k, {case.heads // case.kv_heads}, axis=2)
                v = jnp.repeat(v, {case.heads // case.kv_heads}, axis=2)
                logits = jnp.einsum("btnh,bsnh->bnts", q, k, precision=HI)
                logits = logits * {case.effective_scale!r}
                {"logits = logits + bias" if has_bias else "pass  # no bias"}
                m = jnp.max(jnp.where(vis, logits, -jnp.inf), axis=-1, keepdims=True)
                m = jax.lax.stop_gradient(jnp.where(jnp.isfinite(m), m, 0.0))
                w = jnp.where(vis, jnp.exp(jnp.where(vis, logits, 0.0) - m), 0.0)
                denom = jnp.sum(w, axis=-1, keepdims=True)
                p = w / jnp.where(denom == 0.0, 1.0, denom)
                return jnp.einsum("bnts,bsnh->btnh", p, v, precision=HI)

            out, vjp = jax.vjp(attention, *f32.values())
            grads = vjp(jnp.asarray(x["do"], jnp.float32))
            return dict(zip({("out", *grads)!r}, (out, *grads), strict=True))
    '''
    return ExportSnippet(default_import=_DEFAULT, run_kernel=run_kernel, reference=reference,
                         outputs=("out", *grads))


def _names(has_bias: bool) -> tuple[str, ...]:
    return ("query", "key", "value", "bias") if has_bias else ("query", "key", "value")
