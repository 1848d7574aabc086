#!/usr/bin/env python3
"""sdpa on interpret: standalone repro exported by `kernel-harness export-repro`.

Needs only jax, numpy and the kernel's package (not the harness). Inputs: repro.npz.
Exit 0: every output within tolerance of the float32 HIGHEST-precision reference
below; 1: an output is outside it (NaN counts as outside); 2: the kernel raised.
case: {"batch":2,"bias":null,"dtype":"float32","head_dim":16,"heads":2,"is_causal":false,"kv_heads":2,"kv_len":16,"kv_lengths":null,"mask":null,"mask_keep":0.7,"q_len":16,"q_lengths":[12,16],"scale":null,"seed":0,"window":null}
"""
import os
import platform
import sys
from importlib.metadata import version
os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax
import jax.numpy as jnp
import numpy as np

from tokamax import dot_product_attention as kernel  # --impl tokamax:dot_product_attention

HI = jax.lax.Precision.HIGHEST
INTERPRET = True
# max |kernel - reference| / max |reference| per output (float32), from the family's table
TOL = {'out': 0.0001, 'dq': 0.0002, 'dk': 0.0002, 'dv': 0.0001}
AXES = {'out': ('batch', 'query', 'head', 'dim'), 'dq': ('batch', 'query', 'head', 'dim'), 'dk': ('batch', 'key', 'kv_head', 'dim'), 'dv': ('batch', 'key', 'kv_head', 'dim')}


def load_inputs():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'repro.npz')
    with np.load(path, allow_pickle=False) as data:
        raw = {k: data[k] for k in data.files}
    x = {k: v for k, v in raw.items() if ":" not in k}
    for k in list(x):
        if f"dtype:{k}" in raw:
            x[k] = x[k].view(getattr(jnp, str(raw[f"dtype:{k}"])))
    valid = {k[6:]: v for k, v in raw.items() if k.startswith("valid:")}
    return x, valid


OPTIONS = dict(scale=None, is_causal=False,
               local_window_size=None)


@jax.jit
def _kernel_fwd_bwd(x):
    def f(q, k, v):
        return kernel(q, k, v, None, x.get("mask"),
                      query_seq_lengths=x.get("q_lengths"),
                      key_value_seq_lengths=x.get("kv_lengths"), **OPTIONS)

    out, vjp = jax.vjp(f, *(x[n] for n in ('query', 'key', 'value')))
    return dict(zip(('out', 'dq', 'dk', 'dv'), (out, *vjp(x["do"])), strict=True))


def run_kernel(x):
    return _kernel_fwd_bwd(x)

def reference(x):
    """Softmax attention in float32, HIGHEST; masked keys get exactly zero weight,
    rows that see no key (and padding rows) give 0. GQA: head n reads kv head
    n // 1."""
    t = np.arange(16)[:, None]
    vis = np.ones((2, 2, 16, 16), bool)
    vis = vis & (t < x["q_lengths"][:, None, None, None])  # padding rows
    f32 = {n: jnp.asarray(x[n], jnp.float32) for n in ('query', 'key', 'value')}

    def attention(q, k, v):
        k = jnp.repeat(k, 1, axis=2)
        v = jnp.repeat(v, 1, axis=2)
        logits = jnp.einsum("btnh,bsnh->bnts", q, k, precision=HI)
        logits = logits * 0.25
        pass  # no bias
        m = jnp.max(jnp.where(vis, logits, -jnp.inf), axis=-1, keepdims=True)
        m = jax.lax.stop_gradient(jnp.where(jnp.isfinite(m), m, 0.0))
        w = jnp.where(vis, jnp.exp(jnp.where(vis, logits, 0.0) - m), 0.0)
        denom = jnp.sum(w, axis=-1, keepdims=True)
        p = w / jnp.where(denom == 0.0, 1.0, denom)
        return jnp.einsum("bnts,bsnh->btnh", p, v, precision=HI)

    out, vjp = jax.vjp(attention, *f32.values())
    grads = vjp(jnp.asarray(x["do"], jnp.float32))
    return dict(zip(('out', 'dq', 'dk', 'dv'), (out, *grads), strict=True))


def main():
    print(f"python {platform.python_version()}  jax {jax.__version__}  "
          f"jaxlib {version('jaxlib')}  numpy {np.__version__}  "
          f"backend {jax.default_backend()}  interpret={INTERPRET}")
    x, valid = load_inputs()
    got, want = run_kernel(x), reference(x)
    failed = False
    for name, tol in TOL.items():
        a = np.asarray(got[name], np.float32)
        b = np.asarray(want[name], np.float32)
        keep = np.broadcast_to(valid.get(name, True), b.shape)
        err = np.where(keep, np.abs(a - b), 0.0)
        nan = int(np.sum(keep & ~np.isfinite(a)))
        scale = float(np.max(np.abs(np.where(keep, b, 0.0)), initial=0.0)) or 1.0
        worst = np.unravel_index(int(np.argmax(np.where(np.isnan(err), np.inf, err))), b.shape)
        rel = float("inf") if nan else float(np.max(err, initial=0.0)) / scale
        bad = nan > 0 or not rel <= tol
        failed |= bad
        where = " ".join(f"{axis}={i}" for axis, i in zip(AXES[name], worst, strict=True))
        print(f"{'FAIL' if bad else 'ok  '} {name:<6} max rel err {rel:.3g} (tol {tol:g}) "
              f"non-finite {nan}  worst at {where}: {a[worst]:.6g} vs {b[worst]:.6g}")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        status = main()
    except Exception:  # the kernel (or this script) raised: neither within nor outside
        import traceback
        traceback.print_exc()
        status = 2
    sys.exit(status)
