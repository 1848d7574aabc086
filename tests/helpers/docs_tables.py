"""The parts of ``docs/families.md`` that restate the built-in families' tolerance tables,
rendered from the families themselves, and the tool that writes them into the page.

Each generated part sits between two HTML comments, ``<!-- generated: NAME ... -->`` and
``<!-- end generated: NAME -->``; ``tests/test_docs_tolerances.py`` fails when the page and
the code differ. Regenerate with::

    python -m tests.helpers.docs_tables --write

The judge column is :meth:`kernel_harness.core.judges.Judge.describe`, the text
``kernel-harness describe`` prints in its tolerance table.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from kernel_harness.core.judges import judge_for
from kernel_harness.core.tolerance import Tolerance
from kernel_harness.records.family import Family
from kernel_harness.records.registry import BUILTIN_FAMILIES, import_target

ROOT = Path(__file__).resolve().parents[2]
FAMILIES_PAGE = ROOT / "docs" / "families.md"
REGENERATE = "python -m tests.helpers.docs_tables --write"


def builtin_families() -> list[Family]:
    """The built-in families, in the registry's order (out-of-tree ones are not documented
    in this page)."""
    return [import_target(target) for target in BUILTIN_FAMILIES.values()]


def _entries(family: Family) -> Iterator[tuple[str, str, Tolerance]]:
    for (dtype, output), tol in sorted(family.tolerances.entries.items()):
        yield dtype, output, tol


def _cell(text: str) -> str:
    """One table cell: whitespace collapsed, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|") or "-"


def tolerance_table(families: list[Family]) -> str:
    """Every (family, dtype, output) tolerance as a Markdown table: the fixed bound, the
    judge that decides, and the reason, as stored in each family's ``ToleranceTable``."""
    lines = ["| family | dtype | output | bound | judge | reason |",
             "| --- | --- | --- | --- | --- | --- |"]
    for fam in families:
        for dtype, output, tol in _entries(fam):
            lines.append(f"| `{fam.name}` | {dtype} | {output} | {tol.max_rel_err:g} | "
                         f"{judge_for(tol).describe()} | {_cell(tol.reason)} |")
    return "\n".join(lines)


def calibrated_families(families: list[Family]) -> str:
    """One bullet per family with a calibrated entry: its calibrated dtypes and outputs,
    with the judge; the families with none are named in one closing line."""
    lines, fixed_only = [], []
    for fam in families:
        by_dtype: dict[str, list[str]] = {}
        for dtype, output, tol in _entries(fam):
            if tol.calibrated is not None:
                by_dtype.setdefault(f"{dtype} ({judge_for(tol).describe()})", []).append(output)
        if by_dtype:
            parts = "; ".join(f"{key}: {', '.join(outs)}" for key, outs in by_dtype.items())
            lines.append(f"- `{fam.name}`: {parts}")
        else:
            fixed_only.append(f"`{fam.name}`")
    lines.append(f"- fixed bounds only: {', '.join(fixed_only) or 'none'}")
    return "\n".join(lines)


#: The generated parts of docs/families.md: marker name -> renderer.
BLOCKS: dict[str, Callable[[list[Family]], str]] = {
    "tolerance-table": tolerance_table,
    "calibrated-families": calibrated_families,
}


def block_pattern(name: str) -> re.Pattern[str]:
    """The generated part ``name``: its opening marker, its text, its closing marker."""
    return re.compile(rf"(<!-- generated: {re.escape(name)} [^\n]*-->\n)(.*?)"
                      rf"(<!-- end generated: {re.escape(name)} -->)", re.DOTALL)


def stale_blocks(page: str, families: list[Family]) -> list[str]:
    """The names of the generated parts of ``page`` that differ from the code (or whose
    markers are missing)."""
    stale = []
    for name, render in BLOCKS.items():
        match = block_pattern(name).search(page)
        if match is None or match.group(2) != render(families) + "\n":
            stale.append(name)
    return stale


def regenerate(page: str, families: list[Family]) -> str:
    """``page`` with every generated part rendered again; missing markers are an error."""
    for name, render in BLOCKS.items():
        pattern = block_pattern(name)
        if pattern.search(page) is None:
            raise ValueError(f"docs/families.md has no '<!-- generated: {name} ...-->' block")
        text = render(families) + "\n"
        page = pattern.sub(lambda m, text=text: m.group(1) + text + m.group(3), page)
    return page


def main(argv: list[str] | None = None) -> int:
    """Checks docs/families.md against the families (exit 1 when stale); ``--write``
    rewrites its generated parts instead."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite docs/families.md")
    args = parser.parse_args(argv)
    page, families = FAMILIES_PAGE.read_text(), builtin_families()
    if args.write:
        FAMILIES_PAGE.write_text(regenerate(page, families))
        return 0
    stale = stale_blocks(page, families)
    if stale:
        print(f"docs/families.md is stale ({', '.join(stale)}); run: {REGENERATE}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
