#!/usr/bin/env python3
"""gpu-mha on interpret: standalone repro exported by `kernel-harness export-repro`.

Needs only jax, numpy and the kernel's package (not the harness). Inputs: repro.npz.
Exit 0: every output within tolerance of the float32 HIGHEST-precision reference
below; 1: an output is outside it (NaN counts as outside); 2: the kernel raised.
case: {"batch":1,"block_k":32,"block_kv_dkv":32,"block_kv_dq":32,"block_q":32,"block_q_dkv":32,"block_q_dq":64,"causal":true,"dtype":"float32","head_dim":32,"heads":1,"kv_len":64,"num_stages":2,"num_warps":null,"q_len":128,"scale_mode":"arg","seed":0,"segment_runs":null}
"""
import os
import platform
import sys
from importlib.metadata import version
os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax
import jax.numpy as jnp
import numpy as np

from jax.experimental.pallas.ops.gpu.attention import mha as kernel

HI = jax.lax.Precision.HIGHEST
INTERPRET = True
# max |kernel - reference| / max |reference| per output (float32), from the family's table
TOL = {'out': 0.0002, 'lse': 2e-05, 'dq': 0.0003, 'dk': 0.0003, 'dv': 0.0003}
AXES = {'out': ('batch', 'query', 'head', 'dim'), 'lse': ('batch', 'head', 'query'), 'dq': ('batch', 'query', 'head', 'dim'), 'dk': ('batch', 'key', 'head', 'dim'), 'dv': ('batch', 'key', 'head', 'dim')}


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


from jax.experimental.pallas.ops.gpu.attention import BlockSizes

OPTIONS = dict(sm_scale=0.1767766952966369, causal=True,
               block_sizes=BlockSizes(block_q=32, block_k=32, block_q_dkv=32, block_kv_dkv=32, block_q_dq=64, block_kv_dq=32),
               num_warps=None, num_stages=2,
               interpret=INTERPRET)


@jax.jit
def _kernel_fwd_bwd(q, k, v, seg, do):
    out, vjp = jax.vjp(lambda q, k, v: kernel(q, k, v, seg, **OPTIONS), q, k, v)
    _, lse = kernel(q, k, v, seg, return_residuals=True, **OPTIONS)
    return dict(zip(("out", "lse", "dq", "dk", "dv"), (out, lse, *vjp(do)), strict=True))


def run_kernel(x):
    with jax.default_matmul_precision("highest"):
        return _kernel_fwd_bwd(x["q"], x["k"], x["v"], x.get("segment_ids"), x["do"])

def reference(x):
    """Softmax attention in float32, HIGHEST precision; lse in log base 2."""
    q, k, v, do = (jnp.asarray(x[n], jnp.float32) for n in ("q", "k", "v", "do"))
    mask = np.ones((1, 128, 64), bool)
    mask &= np.arange(128)[:, None] >= np.arange(64)[None, :]  # causal, top-left

    def attention(q, k, v):
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k, precision=HI) * 0.1767766952966369
        s = jnp.where(mask[:, None], s, -jnp.inf)
        lse = jax.nn.logsumexp(s, axis=-1)
        p = jnp.exp(s - lse[..., None])
        return jnp.einsum("bhqk,bkhd->bqhd", p, v, precision=HI), lse / np.log(2.0)

    (out, lse), vjp = jax.vjp(attention, q, k, v)
    dq, dk, dv = vjp((do, jnp.zeros_like(lse)))
    return dict(out=out, lse=lse, dq=dq, dk=dk, dv=dv)


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
