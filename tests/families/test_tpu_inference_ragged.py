"""families/tpu_inference/ragged.py: the draws and record pieces rpa v3, its head-dim-64
variant and MLA v2 share."""

from __future__ import annotations

import ast
import importlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_harness.families.tpu_inference import ragged
from kernel_harness.ops.paged_attention.passes import PassesCase
from kernel_harness.records.registry import get_family


@st.composite
def _fields(draw: st.DrawFn) -> tuple[str, dict]:
    dtype, paging = ragged.draw_paging(draw, ("float32", "bfloat16"), 3)
    return dtype, {**paging, **ragged.draw_attention(draw, paging)}


@settings(max_examples=40, deadline=None, database=None)
@given(_fields())
def test_drawn_paging_and_options_make_a_valid_passes_case(drawn: tuple[str, dict]) -> None:
    dtype, fields = drawn
    case = PassesCase(dtype=dtype, seed=0, **fields)
    assert case.page_size in (8, 16) and 1 <= case.pages_per_seq <= 4
    assert case.num_seqs <= 3 and max(case.kv_lens) <= case.capacity
    assert case.sliding_window is None or 1 <= case.sliding_window <= case.capacity


def test_the_cache_is_judged_as_a_copy_in_either_dtype() -> None:
    table = ragged.cache_update_tolerances(float32=(1e-5, "f32"), bfloat16=(2e-2, "bf16"),
                                           cache="kv_cache", copy="a copy")
    assert table.entries[("float32", "out")].max_rel_err == 1e-5
    assert table.entries[("bfloat16", "out")].max_rel_err == 2e-2
    for dtype in ("float32", "bfloat16"):
        entry = table.entries[(dtype, "kv_cache")]
        assert entry.max_rel_err == 1e-7 and entry.reason == "a copy"


def test_lowering_hooks_lower_as_on_a_v6e_with_no_roles() -> None:
    hooks = ragged.lowering_hooks("q", traceable=print)
    assert hooks.roles == {} and hooks.logit_input == "q"
    assert hooks.tpu_device_kind == "TPU v6 lite" and hooks.traceable is print


@pytest.mark.parametrize(("family", "script_keywords"), [
    ("tpu-inference-rpa-v3", ()), ("tpu-inference-rpa-v3-hd64", ()),
    ("tpu-inference-mla-v2", ("s_dtype",))])
def test_an_exported_script_calls_the_kernel_as_the_check_does(family: str,
                                                               script_keywords: tuple) -> None:
    fam = get_family(family)
    program = importlib.import_module(fam.kernel.__module__).PROGRAM
    cases = fam.seed_cases(frozenset())
    assert cases
    for case in cases:
        run_kernel = fam.export(case).run_kernel
        line = next(x for x in run_kernel.splitlines() if x.startswith("OPTIONS = "))
        script = ast.literal_eval(line.removeprefix("OPTIONS = "))
        check = program.options(dict(case.static_key()), False)
        assert script == {k: v for k, v in check.items()
                          if k not in ("vmem_limit_bytes", *script_keywords)}
        assert all(f"{k}=" in run_kernel for k in ("vmem_limit_bytes", *script_keywords))


def _imported_names(source: str) -> set[str]:
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names - {"annotations"}


@pytest.mark.parametrize(("family", "needs"), [
    ("tpu-inference-rpa-v3", {"ml_dtypes", "Callable"}),
    ("tpu-inference-rpa-v3-hd64", {"ml_dtypes", "Callable"}),
    ("tpu-inference-mla-v2", set())])
def test_an_exported_reference_imports_only_what_its_embedded_code_uses(family: str,
                                                                       needs: set) -> None:
    fam = get_family(family)
    reference = fam.export(fam.seed_cases(frozenset())[0]).reference
    imported = _imported_names(reference)
    body = "\n".join(x for x in reference.splitlines()
                     if not x.startswith(("import ", "from ")))
    unused = {n for n in imported if not re.search(rf"\b{n}\b", body)}
    assert unused == set(), unused
    assert needs <= imported and not ({"ml_dtypes", "Callable"} - needs) & imported
