"""Source text of the paged-decode reference for standalone repro scripts
(:class:`kernel_harness.records.export.ExportSnippet`): the gather of
:mod:`kernel_harness.ops.paged_attention.reference` over the attention op's own
``visibility`` and ``attend``, whose source the script embeds
(:func:`kernel_harness.ops.attention.export.reference_source`)."""

from __future__ import annotations

from collections.abc import Sequence

from kernel_harness.ops.attention import export as attention_export


def reference_source(*, table: str, kv_values: str, lengths: Sequence[int], page_size: int,
                     soft_cap: float | None, window_left: int | None = None,
                     q_value: str = 'jnp.asarray(x["q"], jnp.float32)') -> str:
    """``def reference(x)``: each row's tokens gathered through ``x[table]``, tokens
    t < lengths[b] visible (and, with ``window_left``, t >= lengths[b] - 1 - window_left),
    one query per row and query head h reading kv head h // group, float32 at HIGHEST.
    ``kv_values``: code setting float32 numpy ``k`` and ``v`` pages [kv_heads, total_pages,
    page_size, dim] from ``x`` (the contract's dequantization); ``q_value``: the float32
    q the logits q.k take (a kernel's own q rounding, where its contract has one)."""
    kv = kv_values.strip().replace("\n", "\n    ")
    window = "" if window_left is None else (
        f"\n    mask &= t[None] >= np.asarray({list(lengths)!r})[:, None] - 1 - {window_left}")
    return attention_export.reference_source(f'''
def reference(x):
    """Paged decode attention in float32, HIGHEST precision."""
    {kv}
    table = np.asarray(x["{table}"])
    t = np.arange(table.shape[1] * {page_size})
    page, slot = table[:, t // {page_size}], t % {page_size}
    mask = visibility(1, t.size, kv_lengths=np.asarray({list(lengths)!r}), xp=np)[:, 0, 0]{window}
    kk, vv = (jnp.asarray(np.where(mask[None, :, :, None], pages[:, page, slot], 0.0))
              .transpose(1, 2, 0, 3) for pages in (k, v))  # [batch, tokens, kv_heads, dim]
    q = {q_value}
    out, _ = attend(q[:, None], kk, vv, jnp.asarray(mask)[:, None, None, :], 1.0,
                    layout="bqhd", soft_cap={soft_cap!r})
    return dict(out=out[:, 0])
''')
