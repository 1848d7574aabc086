"""ind-rot-coeffs-in-x-dtype is not equivalent: on bf16 x, rounding cos/sin to bf16 before the
f32 rotation changes many output elements, yet its max error stays under the family's
0.008-of-scale bound. Split pairing, head_dim 128, positions near 2^16, numpy only."""
import ml_dtypes
import numpy as np

bf16 = ml_dtypes.bfloat16
rng = np.random.default_rng(0)
T, D = 256, 128
pos = 66000 + np.arange(T)
inv = 10000.0 ** (-np.arange(D // 2) * 2.0 / D)
ang = pos[:, None] * inv[None, :]
cos64, sin64 = np.cos(ang), np.sin(ang)
cos32, sin32 = cos64.astype(np.float32), sin64.astype(np.float32)
x = rng.standard_normal((T, D)).astype(bf16)
xf = x.astype(np.float64)
x1, x2 = xf[:, : D // 2], xf[:, D // 2:]
exact = np.concatenate([x1 * cos64 - x2 * sin64, x2 * cos64 + x1 * sin64], 1)


def rot(c, s):
    c, s = c.astype(np.float32), s.astype(np.float32)
    a, b = x[:, : D // 2].astype(np.float32), x[:, D // 2:].astype(np.float32)
    return np.concatenate([a * c - b * s, b * c + a * s], 1).astype(bf16).astype(np.float64)


good = rot(cos32, sin32)
bad = rot(cos32.astype(bf16), sin32.astype(bf16))
scale = np.abs(exact).max()
print("max err / scale  correct:", np.abs(good - exact).max() / scale,
      " mutant:", np.abs(bad - exact).max() / scale, " (bound 0.008)")
print("fraction of elements that differ from the correct kernel:", np.mean(good != bad))
ulp = lambda y: np.spacing(np.abs(y).astype(bf16).astype(np.float32)).astype(np.float64) * 2 ** 16  # noqa
eb = np.abs(bad - exact) / np.maximum(np.abs(exact), 1e-30)
eg = np.abs(good - exact) / np.maximum(np.abs(exact), 1e-30)
print("per-element relative err p99  correct:", np.quantile(eg, .99), " mutant:", np.quantile(eb, .99))
print("max per-element relative err (|exact|>0.1)  correct:", eg[np.abs(exact) > .1].max(),
      " mutant:", eb[np.abs(exact) > .1].max())

# ind-rot-products-rounded: each product rounded to bf16, then summed and rounded again.
a, b = x[:, : D // 2].astype(np.float32), x[:, D // 2:].astype(np.float32)
r = lambda y: y.astype(bf16).astype(np.float32)  # noqa: E731
twice = np.concatenate([r(a * cos32) - r(b * sin32), r(b * cos32) + r(a * sin32)], 1)
twice = twice.astype(bf16).astype(np.float64)
e2 = np.abs(twice - exact) / np.maximum(np.abs(exact), 1e-30)
print("products-rounded: max err / scale", np.abs(twice - exact).max() / scale,
      " fraction differing:", np.mean(twice != good),
      " max per-element rel (|exact|>0.1):", e2[np.abs(exact) > .1].max())

# In bf16 ulps of the correctly rounded result (ordered 16-bit patterns):
def ulps(y):
    u = y.astype(bf16).view(np.uint16).astype(np.int32)
    return np.where(u & 0x8000, 0x8000 - u, u)  # monotone integer order


ref = ulps(exact.astype(np.float32))
for name, y in (("correct", good), ("coeffs-in-x-dtype", bad), ("products-rounded", twice)):
    d = np.abs(ulps(y.astype(np.float32)) - ref)
    print(f"{name:18s} max ulps from round(exact): {d.max():4d}   elements > 1 ulp: {np.mean(d > 1):.3f}")
