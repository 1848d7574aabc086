"""docs/families.md restates the built-in families' tolerances (the tolerance table and the
list of calibrated families); those parts are generated from the families
(``tests/helpers/docs_tables.py``), and this test fails when the page and the code differ."""

from __future__ import annotations

import dataclasses

from kernel_harness.core.tolerance import ToleranceTable
from tests.helpers import docs_tables


def test_families_page_matches_the_families() -> None:
    stale = docs_tables.stale_blocks(docs_tables.FAMILIES_PAGE.read_text(),
                                     docs_tables.builtin_families())
    assert not stale, (f"docs/families.md differs from the families in {stale}; "
                       f"regenerate with: {docs_tables.REGENERATE}")


def test_a_changed_bound_or_judge_makes_the_page_stale() -> None:
    families = docs_tables.builtin_families()
    page = docs_tables.FAMILIES_PAGE.read_text()
    splash = next(f for f in families if f.name == "splash")
    key = ("bfloat16", "dsinks")
    for change in ({"max_rel_err": 3e-2},
                   {"calibrated": splash.tolerances.lookup("bfloat16", "out").calibrated}):
        entries = dict(splash.tolerances.entries)
        entries[key] = dataclasses.replace(entries[key], **change)
        drifted = dataclasses.replace(splash, tolerances=ToleranceTable(entries))
        others = [drifted if f is splash else f for f in families]
        assert docs_tables.stale_blocks(page, others), change


def test_regenerating_writes_what_the_check_accepts() -> None:
    families = docs_tables.builtin_families()
    page = docs_tables.FAMILIES_PAGE.read_text()
    emptied = page
    for name in docs_tables.BLOCKS:
        emptied = docs_tables.block_pattern(name).sub(lambda m: m.group(1) + m.group(3), emptied)
    assert set(docs_tables.stale_blocks(emptied, families)) == set(docs_tables.BLOCKS)
    assert docs_tables.stale_blocks(docs_tables.regenerate(emptied, families), families) == []
