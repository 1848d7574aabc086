"""The implementation's source read for code that tells a check from a user's run (issue 55,
principle 2): round 4's observers, time bombs and compiled-only branches are named by kind;
the real kernels (jax's own Pallas ops, read whole; every built-in family's kernel) are
not; a line the user's config accepts passes, and says so."""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import itertools
import pkgutil
import sys
import types

import jax
import jax.numpy as jnp
import pytest

from kernel_harness.core.backends import resolve_backend
from kernel_harness.core.errors import UsageError
from kernel_harness.ops.softmax.cases import SoftmaxCase
from kernel_harness.records import registry
from kernel_harness.records.config import parse_table
from kernel_harness.run import impl_source, source_rules
from kernel_harness.run.crash import crash_summary
from kernel_harness.run.report import failure_classes, summary_lines
from kernel_harness.run.runner import check_case
from tests.adversarial import impls_round4 as r4

#: Round 4's cheats this rule set is for, and the kind each must be named by.
ROUND4_KINDS = {
    "harness_aware_softmax": source_rules.OBSERVES,
    "observed_gmm": source_rules.OBSERVES,
    "observed_mha": source_rules.OBSERVES,
    "precision_observer_norm": source_rules.PRECISION,
    "eager_differs_gmm": source_rules.TRACED,
    "dated_norm": source_rules.CLOCK,
    "trace_count_bomb_softmax": source_rules.STATE,
    "call_count_bomb_mha": source_rules.STATE,
    "compiled_bf16_softmax": source_rules.BACKEND,
    "compiled_xla_backward_norm": source_rules.BACKEND,
    "tpu_only_bf16_gmm": source_rules.BACKEND,
    "compiled_bf16_mha": source_rules.BACKEND,
}


@pytest.fixture(autouse=True)
def _nothing_accepted():
    before = impl_source.accepted_in_force()
    impl_source.use_accepted((), None)
    yield
    impl_source.use_accepted(*before)


@pytest.mark.parametrize("name", [row[0] for row in r4.ROUND4])
def test_round_4_observers_bombs_and_compiled_branches_are_named_and_nothing_else(name):
    found = impl_source.findings(getattr(r4, name))
    kinds = {f.kind for f in found}
    if name in ROUND4_KINDS:
        assert ROUND4_KINDS[name] in kinds, found
        assert all(f.file.endswith("impls_round4.py") and f.text for f in found), found
    else:  # sizes, values, precision, math outside: other defences' classes
        assert not found, found


# -- other spellings of the same classes --------------------------------------------------

def _counting_factory():
    calls = 0

    def impl(x):
        nonlocal calls
        calls += 1
        return x * 2 if calls > 1000 else x

    return impl


class _CountingKernel:
    def __init__(self):
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        return x


_TICKS = itertools.count()


def _ticking(x):
    return x if next(_TICKS) < 1000 else -x


def _on_pytest(x):
    import os
    return -x if "PYTEST_CURRENT_TEST" in os.environ else x


def _on_backend(x):
    if jax.default_backend() == "cpu":
        return x
    return x.astype(jnp.bfloat16)


def _by_date(x):
    return x if datetime.datetime.now().year < 2027 else -x


def _by_modules(x):
    return x if "pytest" in sys.modules else -x


@pytest.mark.parametrize("impl, kind", [
    (_counting_factory(), source_rules.STATE),
    (_CountingKernel(), source_rules.STATE),
    (_ticking, source_rules.STATE),
    (_on_pytest, source_rules.OBSERVES),
    (_on_backend, source_rules.BACKEND),
    (_by_date, source_rules.CLOCK),
    (_by_modules, source_rules.OBSERVES),
])
def test_other_spellings_are_named(impl, kind):
    assert kind in {f.kind for f in impl_source.findings(impl)}


# -- what real kernels do, not named --------------------------------------------------------

_WARNED = False


def _real_kernel_habits(x, acc_ref, interpret=False):
    global _WARNED
    if not _WARNED:
        _WARNED = True  # a warn-once flag: set to a constant
    steps = 0

    def body(i, carry):
        nonlocal steps  # a trace-time helper's own call
        steps += 1
        acc_ref[...] += carry  # a kernel accumulating into its ref
        return carry

    params = dict(interpret=True if interpret else False)
    return body(0, x), params


def test_real_kernel_habits_are_not_named():
    assert impl_source.findings(_real_kernel_habits) == ()


def test_jax_own_pallas_kernels_read_whole_have_no_finding():
    import jax.experimental.pallas.ops as ops

    read, found = 0, []
    for mod in pkgutil.walk_packages(ops.__path__, ops.__name__ + "."):
        try:
            module = importlib.import_module(mod.name)
        except Exception:  # noqa: BLE001 - a GPU-only module may not import on this jax
            continue
        for obj in vars(module).values():
            fns = [obj] if isinstance(obj, types.FunctionType) else (
                [v for v in vars(obj).values() if isinstance(v, types.FunctionType)]
                if isinstance(obj, type) else [])
            for fn in (f for f in fns if f.__module__ == module.__name__):
                read += 1
                found += source_rules.lint(fn)
    assert read > 100 and found == [], found[:5]


def test_a_mutants_copy_is_accepted_like_its_file():
    """kernel-harness mutate compiles a mutant's copy as "<file> [mutant NAME]": an entry
    for the file covers the copy's line too, so the control and the mutants are judged
    alike."""
    found = impl_source.findings(r4.harness_aware_softmax)[0]
    copy = dataclasses.replace(found, file=f"{found.file} [mutant m1]")
    impl_source.use_accepted((_entry(),), "/x/pyproject.toml")
    assert impl_source.unaccepted((found, copy)) == ()


# -- the failure, and the user's acceptance -------------------------------------------------

CASE = SoftmaxCase(dtype="float32", seed=1, leading=(2,), n=100)


def _entry(**kw):
    return {"file": r4.__file__, "kind": source_rules.OBSERVES,
            "text": '"kernel_harness" in sys.modules', "reason": "reviewed: test"} | kw


def test_a_finding_fails_the_example_with_its_class_and_the_user_can_accept_it():
    family, backend = registry.get_family("gpu-softmax"), resolve_backend("interpret")
    result = check_case(family, CASE, backend, r4.harness_aware_softmax)
    assert not result.passed and all(v.passed for v in result.verdicts)
    first = summary_lines(result)[0]
    assert "FAIL gpu-softmax suspicious source (observes the harness)" in first
    assert "impls_round4.py:" in first and "sys.modules" in first
    impl_source.use_accepted((_entry(),), "/x/pyproject.toml")
    result = check_case(family, CASE, backend, r4.harness_aware_softmax)
    assert result.passed
    assert result.accepted_source == (
        f"suspicious source accepted by pyproject.toml: "
        f"{impl_source.findings(r4.harness_aware_softmax)[0]} (reviewed: test)",)
    impl_source.use_accepted((_entry(text="something else"),), "/x/pyproject.toml")
    failed = check_case(family, CASE, backend, r4.harness_aware_softmax)
    assert not failed.passed
    # mutate's kill column names the class (it read "wrong " and nothing before)
    assert failure_classes(failed) == "suspicious source (observes the harness)"
    assert crash_summary(ValueError("the page table\nmore")) == "ValueError: the page table"


def test_accepted_source_entries_are_checked(tmp_path):
    with pytest.raises(UsageError, match="kind 'looks odd' is not one of: observes the"):
        impl_source.check_accepted((_entry(kind="looks odd"),), "pyproject.toml")
    with pytest.raises(UsageError, match=r"accepted-source\]\] entry 1: expected .* all "
                                         r"non-empty"):
        parse_table({"accepted-source": [{"file": "a.py", "kind": "x", "text": ""}]},
                    tmp_path / "pyproject.toml")
    config = parse_table({"accepted-source": [_entry(file="k/a.py")]},
                         tmp_path / "pyproject.toml")
    assert config.accepted_source[0]["file"] == str((tmp_path / "k" / "a.py").resolve())
