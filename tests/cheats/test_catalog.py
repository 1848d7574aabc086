"""The catalog of planted cheats (issue 55, item 11; ``tests/cheats/catalog.py``): every
cheat fails ``kernel-harness check --profile ci`` (``bench`` for the benchmark's class),
its failure naming its class in its first line; the pristine kernels pass the same
commands. The cheapest cheat of each class runs per push, the others nightly."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_harness import cli
from kernel_harness.records.impl import load_impl
from tests.cheats.catalog import (
    CHEATS,
    CLASSES,
    FAMILIES,
    HOLES,
    NOT_APPLICABLE,
    NOT_CAUGHT,
    PER_PUSH_FAMILIES,
    Cheat,
)

BENCH_ARGS = ("--seq-lens", "128", "--dtype", "f32", "--warmup", "0", "--iters", "2",
              "--mode", "fwd")


def _check_argv(family: str, props: list[str], examples: int) -> list[str]:
    argv = ["check", "--no-isolate", family, "--profile", "ci", "--max-examples",
            str(examples), "--shrink-budget", "0"]
    for prop in props:
        argv += ["--property", prop]
    return argv


def _run(capsys, argv: list[str]) -> tuple[int, str]:
    code = cli.main(argv)
    return code, capsys.readouterr().out


def _first_line(out: str, cheat: Cheat) -> str:
    """The first line of the cheat's failure report: after ``=== FAMILY / PROPERTY ...``
    (with the failing run's line when it is FLAKY), or bench's reason line of its row."""
    lines = out.splitlines()
    if cheat.command == "bench":
        row = f"{cheat.family} @128 [{cheat.impl}]: "
        return next((ln for ln in lines if ln.strip().startswith(row)), "")
    head = f"=== {cheat.family} / {cheat.prop} "
    at = next((i for i, ln in enumerate(lines) if ln.startswith(head)), None)
    if at is None or at + 1 >= len(lines):
        return ""
    first = lines[at + 1]
    if first.startswith("[kernel-harness] FLAKY") and at + 2 < len(lines):
        first += "\n" + lines[at + 2]
    return first


def _params(rows):
    return [pytest.param(c, id=c.id, marks=() if c.per_push else pytest.mark.nightly)
            for c in rows]


@pytest.mark.parametrize("cheat", _params(CHEATS))
def test_a_planted_cheat_fails_naming_its_class(capsys, cheat: Cheat):
    if cheat.setup:
        load_impl(cheat.setup)()
    if cheat.command == "bench":
        argv = ["bench", cheat.family, *BENCH_ARGS]
    else:
        argv = _check_argv(cheat.family, [cheat.prop], cheat.examples)
    code, out = _run(capsys, [*argv, "--impl", cheat.impl])
    assert code == 1, out
    first = _first_line(out, cheat)
    missing = [w for w in cheat.words if w not in first]
    assert first and not missing, f"{missing} not in the first line:\n{first}\n\n{out}"
    assert all(note in out for note in cheat.notes), out


@pytest.mark.nightly
@pytest.mark.parametrize("cheat", HOLES, ids=[c.id for c in HOLES])
def test_a_known_hole_still_passes(capsys, cheat: Cheat):
    """What gets through today (docs/kernel-ran.md): the day the harness fails it, this
    test fails, and the row moves to CHEATS."""
    code, out = _run(capsys, [*_check_argv(cheat.family, [cheat.prop], cheat.examples),
                              "--impl", cheat.impl])
    assert code == 0 and "PASS: 1/1 properties passed" in out, out


def _pristine_params():
    """Per family: the per-push rows' commands per push, every row's nightly."""
    params = []
    for family in FAMILIES:
        if family in PER_PUSH_FAMILIES:
            params.append(pytest.param(family, True, id=f"{family}-per-push"))
        params.append(pytest.param(family, False, id=family, marks=pytest.mark.nightly))
    return params


@pytest.mark.parametrize("family, per_push", _pristine_params())
def test_the_pristine_kernel_passes_the_same_commands(capsys, family: str, per_push: bool):
    rows = [c for c in CHEATS if c.family == family and (c.per_push or not per_push)]
    checked = [c for c in rows if c.command == "check"]
    if checked:
        props = list(dict.fromkeys(c.prop for c in checked))
        code, out = _run(capsys, _check_argv(family, props, max(c.examples for c in checked)))
        assert code == 0, out
        assert f"PASS: {len(props)}/{len(props)} properties passed" in out, out
    if any(c.command == "bench" for c in rows):
        code, out = _run(capsys, ["bench", family, *BENCH_ARGS])
        assert code == 0, out
        assert "1 configuration(s) checked and timed, 0 FAIL/ERROR" in out, out


def test_every_class_has_one_cheat_per_push_and_three_families():
    assert set(CLASSES) == {c.cls for c in CHEATS}
    for cls in CLASSES:
        rows = [c for c in CHEATS if c.cls == cls]
        assert sum(c.per_push for c in rows) == 1, cls
        caught = {c.family for c in rows}
        gaps = {f for (k, f) in NOT_CAUGHT if k == cls}
        assert len(caught | gaps) >= 3, (cls, caught)  # a gap counts only if documented
        attention = {"gpu-mha"} & (caught | gaps | {f for (k, f) in NOT_APPLICABLE if k == cls})
        assert attention, f"{cls}: no gpu-mha cheat, and no word on why"
    assert len({c.id for c in CHEATS}) == len(CHEATS)


def test_the_docs_table_lists_every_class_and_cheat():
    """docs/kernel-ran.md's table is this catalog in prose: every class has its row, every
    cheat and hole its name there."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "kernel-ran.md").read_text()
    section = page.partition("## What a PASS proves, and what it cannot")[2]
    assert section, "docs/kernel-ran.md has no section 'What a PASS proves, and what it cannot'"
    rows = [ln for ln in section.splitlines() if ln.startswith("| ")]
    for cls in CLASSES:
        assert any(ln.startswith(f"| {cls}") for ln in rows), cls
    for cheat in (*CHEATS, *HOLES):
        name = cheat.impl.rsplit(":", 1)[1]
        prefix = name.rsplit("_", 1)[0]
        assert f"`{name}`" in section or f"`{prefix}_*`" in section, name
