"""Events every paged-decode kernel reports (the family adds its own knobs' events)."""

from __future__ import annotations

from collections.abc import Sequence

from kernel_harness.ops.paged_attention.strategy import PagedGeometry, head_grouping


def paged_events(case: PagedGeometry, *, dtype: str, lengths: Sequence[int] | None,
                 read_pages: Sequence[int]) -> list[str]:
    """Head grouping, page size, lengths on page edges (partial last page, rows without
    keys and full rows), masked slots loaded, table entries never loaded, spare pages,
    shuffled pages, soft cap. ``read_pages[b]``: table entries of row b the kernel loads."""
    page_size, capacity, pages_per_seq = case.page_size, case.capacity, case.pages_per_seq
    ev = [dtype, f"page-size-{page_size}", head_grouping(case.q_heads, case.kv_heads),
          f"kv-heads-{case.kv_heads}" if case.kv_heads < 4 else "kv-heads>=4"]
    if lengths is None:
        ev.append("no-lengths")
    else:
        if any(n % page_size for n in lengths):
            ev.append("partial-page")
        if 0 in lengths:
            ev.append("rows-without-keys")
        if capacity in lengths:
            ev.append("full-row")
        if any(r * page_size > n for r, n in zip(read_pages, lengths, strict=True)):
            ev.append("reads-masked-slots")
        if any(r < pages_per_seq for r in read_pages):
            ev.append("unread-table-entries")
    if case.spare_pages:
        ev.append("spare-pages")
    if case.shuffle:
        ev.append("shuffled")
    if case.soft_cap is not None:
        ev.append("soft-cap")
    return ev
