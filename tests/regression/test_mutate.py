"""Mutation self-check: text replacement, stale entries, the child process, the kill matrix,
and the CI subset: each family's ``ci`` mutants must be killed."""

import os

import pytest

from kernel_harness import cli
from kernel_harness.records import registry
from kernel_harness.records.mutant import Mutant, StaleMutant, apply, patched_source
from kernel_harness.regression import mutate
from tests.helpers.libraries import library_missing

SRC = "a = 1\nb = a + 1\nc = a + 1\n"


def _m(old, new, occurrence=None, module="tests.helpers.toy_family", name="m"):
    return Mutant(name=name, description="-", module=module, old=old, new=new,
                  occurrence=occurrence)


def test_apply_replaces_exactly_the_chosen_occurrence():
    assert apply(_m("b = a", "b = -a"), SRC) == "a = 1\nb = -a + 1\nc = a + 1\n"
    assert apply(_m("a + 1", "a - 1", 2), SRC) == "a = 1\nb = a + 1\nc = a - 1\n"


@pytest.mark.parametrize("mutant, message", [
    (_m("d = 4", "d = 5"), "text not found"),
    (_m("a + 1", "a - 1"), "occurs 2 times"),
    (_m("a + 1", "a - 1", 3), "occurrence 3 but the text occurs 2 times"),
    (_m("a = 1", "a = 1"), "identical"),
])
def test_stale_or_ambiguous_text_is_an_error(mutant, message):
    with pytest.raises(StaleMutant, match=message):
        apply(mutant, SRC)


@pytest.fixture
def toy_registry(monkeypatch):
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy", "tests.helpers.toy_family:FAMILY")


def test_child_runs_the_mutated_module(toy_registry):
    kw = dict(properties=["matches-reference"], max_examples=3, golden=False)
    killed = mutate.run_one("toy", _m("return jnp.logaddexp(x, 0.0)",
                                      "return jnp.logaddexp(x, 0.001)"), **kw)
    assert killed.status == "KILLED", killed
    col = killed.columns["matches-reference"]
    assert col["examples"] == 1 and col["how"] == "wrong y,dx" and col["seconds"] > 0
    crash = mutate.run_one("toy", _m("return jnp.logaddexp(x, 0.0)", "return x[None]"), **kw)
    assert crash.status == "KILLED"
    assert crash.columns["matches-reference"]["how"].startswith("crash ValueError")
    survivor = mutate.run_one("toy", _m("return jnp.logaddexp(x, 0.0)",
                                        "return jnp.logaddexp(0.0, x)"), **kw)
    assert survivor.status == "SURVIVED"
    assert survivor.columns["matches-reference"] == {**survivor.columns["matches-reference"],
                                                     "killed": False, "examples": 3}
    control = mutate.run_one("toy", None, **kw)
    assert control.status == "PASS"


@pytest.mark.nightly  # child processes per push: test_ci_mutants_are_killed
def test_each_mutant_runs_in_a_process_of_its_own(toy_registry):
    """One child process forks a fresh process per mutant: a mutant that kills its process
    (a native abort) or hangs is that mutant's ERROR, and the next mutant runs from a clean
    state: the module it mutates was never imported where it was forked from."""
    aborts = _m("import jax\n", "import jax\nimport os\nos.abort()\n", name="aborts")
    hangs = _m("import jax\n", "import jax\nimport time\ntime.sleep(600)\n", name="hangs")
    shifted = _m("return jnp.logaddexp(x, 0.0)", "return jnp.logaddexp(x, 0.001)",
                 name="shifted")
    survivor = _m("return jnp.logaddexp(x, 0.0)", "return jnp.logaddexp(0.0, x)",
                  name="survivor")
    seen = []
    results = mutate.run_many("toy", [aborts, shifted, hangs, None, survivor],
                              properties=["matches-reference"], max_examples=3, golden=False,
                              timeout=8, on_result=seen.append)
    assert seen == results
    by = {r.mutant: r for r in results}
    assert [r.mutant for r in results] == ["aborts", "shifted", "hangs", None, "survivor"]
    assert by["aborts"].status == "ERROR", by["aborts"]
    assert "killed by signal 6" in by["aborts"].error, by["aborts"]
    assert by["hangs"].status == "ERROR" and by["hangs"].error == "timed out after 8s"
    # After a mutant died and one hung, the next ones start clean: the shifted kernel is
    # killed, the unmutated control passes, the equivalent mutant survives.
    assert by["shifted"].status == "KILLED" and by[None].status == "PASS"
    assert by["survivor"].status == "SURVIVED", by["survivor"]


def test_a_mutant_whose_kernel_run_hangs_is_killed_by_the_hang(toy_registry):
    """A kernel that never returns is caught as check catches it (a hang is a failure):
    past the per-example limit the column is killed with the example named, not the whole
    mutant's budget spent and reported as an ERROR."""
    hangs = _m("return jnp.logaddexp(x, 0.0)",
               "return __import__('time').sleep(600) or jnp.logaddexp(x, 0.0)", name="hangs")
    result = mutate.run_one("toy", hangs, properties=["matches-reference"], max_examples=3,
                            golden=False, timeout=60, example_timeout=1)
    assert result.status == "KILLED", result
    col = result.columns["matches-reference"]
    assert col["how"] == "hang: no result within 1s" and col["examples"] == 1, col
    assert '"length"' in col["case"] and col["seconds"] < 30


@pytest.mark.parametrize("mutant, message", [
    (_m("def softplus(x):", "def softplus(x)"), "SyntaxError"),
    (_m("no such text", "x"), "text not found"),
    (_m("return softplus(x) * (1 + 3e-6)", "return x", module="tests.helpers.toy_impls"),
     "the family never imported tests.helpers.toy_impls"),
    (_m("import jax\n", "import jax\nimport no_such_module_xyz\n"), "the family does not import"),
])
def test_broken_catalog_entries_are_errors_not_kills(toy_registry, mutant, message):
    result = mutate.run_one("toy", mutant, properties=["matches-reference"], max_examples=2,
                            golden=False)
    assert result.status == "ERROR" and message in result.error, result


def test_cli_prints_the_kill_matrix_and_fails_on_survivors(toy_registry, capsys, tmp_path):
    argv = ["mutate", "toy", "--catalog", "tests.helpers.toy_mutants:MUTANTS",
            "--max-examples", "3",
            "--property", "matches-reference",
            "--golden-dir", str(tmp_path)]
    assert cli.main([*argv, "--tag", "ci"]) == 0
    out = capsys.readouterr().out
    assert "(control: no mutant)  passed 3ex" in out
    assert "shifted               killed 1ex" in out and "PASS: toy: 1/1 mutants killed" in out
    header = next(line for line in out.splitlines() if line.startswith("mutant "))
    assert header.split() == ["mutant", "matches-reference", "golden", "gate", "wall", "verdict"]
    assert "  n/a     n/a  " in out  # golden and gate columns: toy has no goldens in tmp_path
    assert cli.main(argv) == 1
    out = capsys.readouterr().out
    assert "survived: ['harmless']" in out and "1 ERROR (stale or broken catalog entries)" in out
    assert cli.main([*argv, "--list"]) == 0
    assert "stale" in capsys.readouterr().out
    assert cli.main([*argv, "--mutant", "nope"]) == 2


def test_a_catalog_may_plant_its_mutants_in_another_implementation(toy_registry, capsys,
                                                                  tmp_path):
    """A family whose kernel fails on its own (tpu-all-gather: jax's kernel) keeps its
    mutants in the corrected implementation: the catalog's IMPL runs in place of the
    family's kernel, the control too. Were it not run, the mutated module would never be
    imported: an ERROR, not a kill."""
    spec = "tests.helpers.toy_impl_mutants:MUTANTS"
    assert mutate.catalog_impl("toy", spec) == "tests.helpers.toy_planted_impl:softplus_copy"
    assert mutate.catalog_impl("toy", "tests.helpers.toy_mutants:MUTANTS") is None
    assert (mutate.catalog_impl("tpu-all-gather")
            == "kernel_harness.kernels.all_gather_ring:all_gather")
    argv = ["mutate", "toy", "--catalog", spec, "--max-examples", "3", "--property",
            "matches-reference", "--golden-dir", str(tmp_path)]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "planted in tests.helpers.toy_planted_impl:softplus_copy" in out
    assert "(control: no mutant)  passed 3ex" in out
    assert "PASS: toy: 1/1 mutants killed" in out


# ---------------------------------------------------------------- real families

#: Every built-in family with a catalog (``.github/workflows/ci.yml``'s nightly kill-matrices
#: job lists the same ones: tests/test_ci_recipes.py).
FAMILIES_WITH_CATALOGS = mutate.families_with_catalogs()


def test_the_families_that_keep_catalogs():
    """A catalog that disappears (or a new one) is noticed here, not by a shorter CI."""
    assert sorted(FAMILIES_WITH_CATALOGS) == sorted([
        "splash", "hstu", "flash", "megablox-gmm", "gpu-norm", "gpu-softmax", "tpu-ragged-paged",
        "tpu-paged", "gpu-paged", "tpu-inference-quantized-matmul",
        "tpu-inference-all-gather-matmul", "tpu-inference-rpa-v3", "tpu-inference-mla-v2",
        "tpu-inference-blockwise-quantized-matmul", "tpu-inference-rpa-v3-hd64",
        "tpu-all-gather", "tpu-inference-fused-moe", "flywheel-tpu-kv-cache-write",
        "flywheel-tpu-rotary", "flywheel-tpu-ragged-append", "flywheel-tpu-flash",
        "flywheel-tpu-paged-decode", "deltanet-tpu-gdn2", "deltanet-tpu-gdn2-bf16",
        "flywheel-tpu-varlen", "flywheel-tpu-varlen-paged", "gdn2-pallas", "flywheel-tpu-gdn",
        "flywheel-tpu-kda"])


def _not_runnable(name):
    """Why ``name``'s catalog cannot run here (None: it can); on CI a missing kernel library
    fails the test (README's test command installs the libraries)."""
    if name not in registry.BUILTIN_FAMILIES:
        return f"family {name!r} is not registered"
    family = registry.get_family(name)
    if not family.backends:
        why = f"{name} needs {family.requires}"
        if library_missing(family) and os.environ.get("CI") == "true":
            pytest.fail(f"CI: {why}")
        return f"NOT TESTED: {why}"  # or this jax lacks what the kernel calls
    return None


def _catalog(name):
    why = _not_runnable(name)
    if why:
        pytest.skip(why)
    return mutate.load_catalog(name)


@pytest.mark.parametrize("name", FAMILIES_WITH_CATALOGS)
def test_every_catalog_entry_applies_to_the_current_source(name):
    """A stale catalog is caught here in a second, without running anything."""
    catalog = _catalog(name)
    assert len(catalog) >= 6 and any("ci" in m.tags for m in catalog)
    problems = []
    for m in catalog:
        try:
            origin, source = patched_source(m)
            compile(source, str(origin), "exec")
        except (StaleMutant, SyntaxError) as e:
            problems.append(f"{type(e).__name__}: {e}")
    assert not problems, "\n".join(problems)


#: The families whose ``ci`` mutants die in every CI run (attention and a row-wise op: 4 of
#: the 50); the other families' ``ci`` mutants die nightly (with every mutant of every catalog
#: in .github/workflows/ci.yml's kill-matrices): docs/ci.md, "What CI leaves to the nightly".
PER_PUSH = ("splash", "gpu-softmax")


@pytest.mark.slow
@pytest.mark.parametrize("group", [
    "per-push", pytest.param("the-rest", marks=pytest.mark.nightly)])
def test_ci_mutants_are_killed(group):
    """The CI subset: the ``ci`` mutants of the group's families, a few examples each, must
    all die; all of them forked from one child process (one import of jax and the harness,
    not one per family)."""
    assert set(PER_PUSH) <= set(FAMILIES_WITH_CATALOGS)
    families = [n for n in FAMILIES_WITH_CATALOGS if (n in PER_PUSH) == (group == "per-push")]
    runnable = [n for n in families if _not_runnable(n) is None]
    assert len(runnable) >= len(families) - 2  # hd64 needs jax >= 0.11
    chosen = {n: [m for m in mutate.load_catalog(n) if "ci" in m.tags] for n in runnable}
    results = mutate.run_families(chosen, properties=["matches-reference"], max_examples=12,
                                  golden=False, timeout=600)
    tables = []
    for name, mutants in chosen.items():
        assert [r.mutant for r in results[name]] == [m.name for m in mutants]
        if not all(r.status == "KILLED" for r in results[name]):
            tables.append(f"{name}:\n" + mutate.kill_matrix(results[name],
                                                             ["matches-reference"]))
    assert not tables, "\n".join(tables)


def test_gate_column_kills_what_tolerances_let_through(toy_registry, tmp_path):
    """A 3e-6 relative error passes the 1e-5 tolerance (property and golden) but not the gate."""
    from kernel_harness.core.backends import resolve_backend
    from kernel_harness.regression import gate, golden
    from tests.helpers.toy_family import FAMILY, ToyCase

    backend = resolve_backend("interpret")
    cases = [golden.GoldenCase(name="g", case=ToyCase(dtype="float32", seed=4, length=8))]
    golden.save_manifest(FAMILY, cases, tmp_path)
    assert golden.run_family(FAMILY, backend, mode="record", root=tmp_path)[0].ok
    gate.record(FAMILY, backend, path=gate.default_path("toy", tmp_path), root=tmp_path)
    slightly = _m("return jnp.logaddexp(x, 0.0)", "return jnp.logaddexp(x, 0.0) * (1 + 3e-6)")
    result = mutate.run_one("toy", slightly, properties=["matches-reference"], max_examples=3,
                            golden_root=tmp_path)
    cols = result.columns
    assert not cols["matches-reference"]["killed"] and not cols["golden"]["killed"]
    assert cols["gate"]["killed"] and "g: y WORSE" in cols["gate"]["how"]
    assert result.status == "KILLED"


def test_golden_column_that_compares_nothing_fails_the_run(toy_registry, capsys, tmp_path):
    """Goldens named in a manifest but none comparable (here: never recorded): the control
    run's golden column compared nothing, so mutate cannot claim its kills mean anything."""
    from kernel_harness.regression import golden
    from tests.helpers.toy_family import FAMILY, ToyCase

    golden.save_manifest(FAMILY, [golden.GoldenCase(
        name="g", case=ToyCase(dtype="float32", seed=4, length=8))], tmp_path)
    argv = ["mutate", "toy", "--catalog", "tests.helpers.toy_mutants:MUTANTS", "--tag", "ci",
            "--max-examples", "3", "--property", "matches-reference", "--golden-dir",
            str(tmp_path)]
    assert cli.main(argv) == 1
    out = capsys.readouterr().out
    assert "FAIL: compared nothing in the control run: golden: missing golden file" in out
    assert cli.main([*argv, "--no-golden"]) == 0


def test_load_patched_is_the_catalog_edit_in_process_and_leaves_the_original():
    """The tests' in-process patcher applies the very edit `mutate` runs."""
    import numpy as np

    from kernel_harness.records.mutant import load_patched
    from tests.helpers import toy_family, toy_mutants

    shifted, _, stale = toy_mutants.MUTANTS
    copy = load_patched(shifted)
    assert copy is load_patched(shifted) and copy is not toy_family
    x = np.zeros(4, np.float32)
    assert np.allclose(np.asarray(copy.softplus(x)), np.logaddexp(0.01, 0.0))
    assert np.allclose(np.asarray(toy_family.softplus(x)), np.log(2.0))
    with pytest.raises(StaleMutant, match="text not found"):
        load_patched(stale)


# ---------------------------------------------------------------- kill rates over seeds

def test_seeds_are_parsed_as_check_takes_them():
    from kernel_harness.cli.mutate import parse_seeds
    from kernel_harness.core.errors import UsageError

    assert parse_seeds(None) == [None]
    assert parse_seeds("3") == [3] and parse_seeds("0-3") == [0, 1, 2, 3]
    assert parse_seeds("1,4-5,4") == [1, 4, 5]
    for bad in ("x", "1-", "-1", ""):
        with pytest.raises(UsageError, match="--seeds"):
            parse_seeds(bad)


def test_a_run_seed_picks_the_stream_and_the_same_seed_the_same_stream():
    """The child's column runs Hypothesis with the seed (not the derandomized stream): the
    cases a seed draws are the same each time and differ from another seed's."""
    import dataclasses

    from hypothesis import Phase, settings

    from kernel_harness.core.backends import resolve_backend
    from kernel_harness.regression.mutant_child import _run_column
    from tests.helpers import toy_family

    def drawn(seed):
        seen = []

        def run(impl, case, inputs, backend):
            seen.append(case.seed)
            return toy_family.FAMILY.run(impl, case, inputs, backend)

        family = dataclasses.replace(toy_family.FAMILY, run=run)
        column = _run_column(family, "matches-reference", resolve_backend("interpret"),
                             settings(max_examples=4, database=None,
                                      derandomize=seed is None,
                                      phases=(Phase.explicit, Phase.generate)), seed=seed)
        assert not column["killed"] and seen
        return seen

    assert drawn(1) == drawn(1) and drawn(2) == drawn(2)
    assert drawn(1) != drawn(2) and drawn(None) == drawn(None)


# Nightly: the mutate CLI's matrix runs per push
# (test_cli_prints_the_kill_matrix_and_fails_on_survivors).
@pytest.mark.nightly
def test_cli_reports_each_mutants_kill_rate_over_the_seeds(toy_registry, capsys, tmp_path):
    argv = ["mutate", "toy", "--catalog", "tests.helpers.toy_mutants:MUTANTS",
            "--max-examples", "2", "--property", "matches-reference", "--no-golden",
            "--seeds", "0-1", "--no-modes-first"]
    assert cli.main([*argv, "--mutant", "shifted"]) == 0
    out = capsys.readouterr().out
    assert "seeds 0,1" in out.splitlines()[0]
    assert "seed 0: control (no mutant): PASS" in out and "seed 1: shifted" in out
    assert "shifted                      killed on 2/2 seeds\n" in out
    assert "PASS: toy: every mutant killed on every seed" in out
    assert cli.main([*argv, "--mutant", "harmless", "--skip-control"]) == 1
    out = capsys.readouterr().out
    assert "harmless                     killed on 0/2 seeds; not on [0, 1]" in out
    assert "control" not in out and "FAIL: toy: some mutant survived a seed" in out


def test_a_failing_control_says_what_failed_and_replays_it(monkeypatch, capsys):
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy-wrong",
                        "tests.helpers.toy_wrong_family:WRONG")
    argv = ["mutate", "toy-wrong", "--catalog", "tests.helpers.toy_mutants:MUTANTS",
            "--mutant", "shifted", "--max-examples", "3", "--property", "matches-reference",
            "--no-golden", "--no-modes-first"]
    assert cli.main(argv) == 1
    out = capsys.readouterr().out
    assert "control matches-reference: wrong y,dx (example 1)" in out
    replay = next(line for line in out.splitlines() if "replay:" in line)
    assert ("kernel-harness repro toy-wrong --backend interpret --property matches-reference"
            in replay)
    case = replay.split("--case '", 1)[1].removesuffix("'")
    assert cli.main(["repro", "toy-wrong", "--case", case]) == 1  # the same failure, again


def test_a_catalog_in_the_working_tree_imports_without_pythonpath(tmp_path, monkeypatch):
    """--catalog MODULE:ATTR finds a module of the working directory, as --impl does (an
    independent tester's catalog needed PYTHONPATH set before)."""
    (tmp_path / "my_mutants.py").write_text(
        "from kernel_harness.records.mutant import Mutant\n"
        "MUTANTS = [Mutant(name='m1', description='d', module='x.y', old='a', new='b')]\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path
                                     if p not in ("", ".", str(tmp_path))])
    assert [m.name for m in mutate.load_catalog("gpu-softmax", "my_mutants:MUTANTS")] == ["m1"]
