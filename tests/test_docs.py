"""README.md stays a working front page: it opens with the two set-up commands, `.ci/run`
runs its test command verbatim, it stays short, and every relative link in it (to the manual
in ``docs/``, to ``findings/``, to the failure picture) points to a file that exists, and to a
heading that exists where the link names one.

README.md is rendered on its own (by GitHub, or by pip as the package's description), not by
MkDocs, so ``mkdocs build --strict`` (in `.ci/run`) cannot check its links; this test does.
It also checks that the manual's front page, ``docs/index.md``, links every page in
``docs/`` and that the ``nav`` of ``mkdocs.yml`` names exactly those pages.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

# [text](target) and ![alt](target); the target ends at whitespace or the closing parenthesis.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
MAIN_COMMAND = (
    "python3 -m venv .venv && .venv/bin/pip install -e . && "
    ".venv/bin/kernel-harness check --profile dev --jobs 2 gpu-mha gpu-paged megablox-gmm "
    "gpu-norm gpu-softmax"
)
TEST_COMMAND = (
    "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && "
    ".venv/bin/pip install --no-deps -r requirements/kernel-libraries.txt && "
    ".venv/bin/pytest -n 2 --hypothesis-profile ci"
)


def relative_links(markdown: str) -> list[str]:
    """The link targets of ``markdown`` that point into the repository (not URLs), outside
    code blocks and code spans."""
    prose = CODE_SPAN.sub("", FENCE.sub("", markdown))
    targets = [m.group(1) for m in LINK.finditer(prose)]
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def heading_anchors(markdown: str) -> set[str]:
    """GitHub's anchors for the headings of ``markdown``: lower case, punctuation other than
    hyphens dropped, each space a hyphen."""
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", FENCE.sub("", markdown), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def broken_links(markdown: str, base: Path) -> list[str]:
    """Each relative link of ``markdown`` (a file under ``base``) that leads nowhere, with why."""
    broken = []
    for target in relative_links(markdown):
        path, _, anchor = target.partition("#")
        file = (base / path).resolve() if path else None
        if file is not None and not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor:
            text = file.read_text() if file is not None else markdown
            if file is not None and file.suffix != ".md":
                broken.append(f"{target}: an anchor into a file that is not Markdown")
            elif anchor not in heading_anchors(text):
                broken.append(f"{target}: no heading with anchor #{anchor}")
    return broken


def test_readme_opens_with_the_two_commands() -> None:
    blocks = re.findall(r"^```bash\n(.*?)\n```", README.read_text(), re.MULTILINE | re.DOTALL)
    assert blocks[:2] == [MAIN_COMMAND, TEST_COMMAND]
    first_prose = README.read_text().split("```")[0]
    assert "Set up and run the main job" in first_prose


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert TEST_COMMAND.removeprefix("python3 -m venv .venv && ") in ci.splitlines()


def test_readme_stays_a_front_page() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move detail to docs/"


def test_readme_links_the_manual() -> None:
    linked = {Path(t.partition("#")[0]) for t in relative_links(README.read_text())}
    pages = {p.relative_to(ROOT) for p in (ROOT / "docs").glob("*.md")} - {Path("docs/index.md")}
    assert pages <= linked, f"README.md does not link {sorted(map(str, pages - linked))}"


def test_every_relative_link_in_readme_leads_somewhere() -> None:
    links = relative_links(README.read_text())
    assert len(links) > 10, links  # the manual's pages, the findings, the picture
    assert broken_links(README.read_text(), ROOT) == []


@pytest.mark.parametrize(
    "planted",
    [
        "[gone](docs/no-such-page.md)",
        "![gone](docs/no-such-picture.png)",
        "[gone](findings/no-such-finding/)",
        "[bad anchor](docs/judge.md#no-such-heading)",
        "[bad anchor here](#no-such-heading)",
    ],
)
def test_a_broken_link_is_caught(planted: str) -> None:
    text = README.read_text() + f"\nSee {planted}.\n"
    assert len(broken_links(text, ROOT)) == 1


def test_links_in_code_are_not_links() -> None:
    text = "`[x](nowhere.md)`\n\n```\n[y](nowhere.md)\n```\n[z](https://example.org/none.md)\n"
    assert relative_links(text) == []


DOCS = ROOT / "docs"


def manual_pages() -> set[str]:
    """The manual's pages: every Markdown file in ``docs/``, by its name there."""
    return {p.name for p in DOCS.glob("*.md")}


def unlisted_in_index(index: str, pages: set[str]) -> set[str]:
    """The pages (other than the index itself) that ``index`` does not link."""
    linked = {t.partition("#")[0] for t in relative_links(index)}
    return pages - {"index.md"} - linked


def nav_pages(mkdocs_yml: str) -> set[str]:
    """The pages named in the ``nav:`` of ``mkdocs_yml`` (``- Title: page.md`` lines)."""
    nav = mkdocs_yml.partition("\nnav:\n")[2]
    return set(re.findall(r"^\s+-\s+[^:\n]+:\s*(\S+\.md)\s*$", nav, re.MULTILINE))


def test_the_index_links_every_page_of_the_manual() -> None:
    pages = manual_pages()
    assert len(pages) > 10, pages
    assert unlisted_in_index((DOCS / "index.md").read_text(), pages) == set()


def test_the_mkdocs_nav_names_every_page_and_only_pages() -> None:
    nav = nav_pages((ROOT / "mkdocs.yml").read_text())
    assert nav == manual_pages(), (f"not in mkdocs.yml nav: {sorted(manual_pages() - nav)}; "
                                   f"in nav, no such page: {sorted(nav - manual_pages())}")


def test_a_page_missing_from_the_index_or_nav_is_caught() -> None:
    index = (DOCS / "index.md").read_text().replace("(corpus.md)", "(elsewhere.md)")
    assert "corpus.md" in unlisted_in_index(index, manual_pages())
    nav = (ROOT / "mkdocs.yml").read_text().replace("  - CI: ci.md\n", "")
    assert "ci.md" in manual_pages() - nav_pages(nav)
