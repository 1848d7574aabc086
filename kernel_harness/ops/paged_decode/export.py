"""Source text of the paged-decode reference for standalone repro scripts
(:class:`kernel_harness.spec.export.ExportSnippet`): the same math as
:mod:`kernel_harness.ops.paged_decode.reference`, restated with only jax and numpy."""

from __future__ import annotations

from collections.abc import Sequence


def reference_source(*, table: str, kv_values: str, lengths: Sequence[int], page_size: int,
                     soft_cap: float | None) -> str:
    """``def reference(x)``: each row's tokens gathered through ``x[table]``, tokens
    t < lengths[b] visible, one query per row and query head h reading kv head h // group,
    float32 at HIGHEST. ``kv_values``: code setting float32 numpy ``k`` and ``v`` pages
    [kv_heads, total_pages, page_size, dim] from ``x`` (the contract's dequantization)."""
    cap = "" if soft_cap is None else (
        f"\n            s = {soft_cap!r} * jnp.tanh(s / {soft_cap!r})  # soft cap")
    kv = kv_values.strip().replace("\n", "\n            ")
    return f'''
        def reference(x):
            """Paged decode attention in float32, HIGHEST precision."""
            {kv}
            table = np.asarray(x["{table}"])
            t = np.arange(table.shape[1] * {page_size})
            page, slot = table[:, t // {page_size}], t % {page_size}
            mask = t[None, :] < np.asarray({list(lengths)!r})[:, None]  # [batch, tokens]
            kk = jnp.asarray(np.where(mask[None, :, :, None], k[:, page, slot], 0.0))
            vv = jnp.asarray(np.where(mask[None, :, :, None], v[:, page, slot], 0.0))
            q = jnp.asarray(x["q"], jnp.float32)
            kv_heads, batch = kk.shape[:2]
            qg = q.reshape(batch, kv_heads, q.shape[1] // kv_heads, q.shape[2])
            s = jnp.einsum("bkgd,kbtd->bkgt", qg, kk, precision=HI){cap}
            vis = jnp.asarray(mask)[:, None, None, :]
            s = jnp.where(vis, s, -jnp.inf)
            m = jnp.max(s, axis=-1, keepdims=True)
            p = jnp.where(vis, jnp.exp(s - jnp.where(jnp.isfinite(m), m, 0.0)), 0.0)
            d = jnp.sum(p, axis=-1, keepdims=True)
            p = p / jnp.where(d > 0, d, 1.0)
            out = jnp.einsum("bkgt,kbtd->bkgd", p, vv, precision=HI)
            return dict(out=out.reshape(q.shape))
    '''
