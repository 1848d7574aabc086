"""compat.gpu_ops: jax's Pallas Triton ops, which jax 0.12.1 removed. The gpu-* families
import on any jax and have no backend where the ops are missing, saying why; the suite skips
the tests that need them there, saying so (conftest.TRITON_OPS_TESTS, the ``triton_ops``
marker, and test modules that do not import without them). Runs on both stacks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from kernel_harness.core.compat import gpu_ops
from kernel_harness.records.registry import family_names, get_family
from tests.helpers.repo_conftest import load_repo_conftest

ROOT = Path(__file__).resolve().parents[2]
MISSING = gpu_ops.missing_gpu_ops()


def test_each_op_is_its_module_or_none_and_both_stacks_are_all_or_nothing():
    for name in gpu_ops.TRITON_OPS:
        module = gpu_ops.gpu_op(name)
        assert (module is None) == (name in MISSING), name
        if module is not None:
            assert module.__name__ == f"jax.experimental.pallas.ops.gpu.{name}"
    # jax 0.10.2 has every one; jax 0.12.1 removed every one (and kept the package).
    assert MISSING in ((), gpu_ops.TRITON_OPS)
    assert gpu_ops.gpu_op("no_such_op") is None


def test_another_missing_module_is_an_error_not_a_missing_op(monkeypatch):
    """Only the op's own module (or its package) missing means "this jax has none": the op's
    own broken import (a dependency missing) still raises."""
    def broken(name):
        raise ModuleNotFoundError("No module named 'triton'", name="triton")

    monkeypatch.setattr(gpu_ops.importlib, "import_module", broken)
    with pytest.raises(ModuleNotFoundError, match="triton"):
        gpu_ops.gpu_op("softmax")


def test_the_reason_names_the_jax_the_module_the_removal_and_the_install():
    why = gpu_ops.gpu_ops_missing_reason(("softmax",))
    assert f"the installed jax {jax.__version__}" in why
    assert "jax.experimental.pallas.ops.gpu.softmax" in why
    assert "jax 0.12.1 removed its Pallas Triton ops" in why and "tokamax" in why
    assert why.startswith("jax <= 0.12.0.1")
    assert 'pip install "jax==0.12.0.1" "jaxlib==0.12.0.1"' in why
    assert '"jax[cuda12]==0.12.0.1"' in why


def test_every_triton_ops_test_path_exists():
    missing = [p for p in load_repo_conftest().TRITON_OPS_TESTS if not (ROOT / p).exists()]
    assert not missing, f"conftest.TRITON_OPS_TESTS names missing test paths: {missing}"


def test_the_families_without_a_backend_are_exactly_those_of_the_missing_ops():
    """On a jax without the ops, exactly conftest.TRITON_OPS_FAMILIES lose their backends
    (a sixth family silently losing its kernel fails here), each saying why; on a jax with
    them, each runs on both GPU backends. torch-sdpa aside: it needs the [torch] extra,
    which neither CI stack installs."""
    expected = set(load_repo_conftest().TRITON_OPS_FAMILIES)
    without = {n for n in family_names() if not get_family(n).backends
               and "kernel-harness[torch]" not in get_family(n).requires}
    if MISSING:
        assert without == expected
        for name in expected:
            assert "jax 0.12.1 removed its Pallas Triton ops" in get_family(name).requires
    else:
        assert not without & expected
        for name in expected:
            assert get_family(name).backends == frozenset({"interpret", "gpu"}), name


@pytest.mark.skipif(not MISSING, reason="this stack's jax has the Pallas Triton ops")
def test_without_the_ops_check_list_describe_and_export_say_why(capsys, tmp_path):
    from kernel_harness.cli import main

    assert main(["check", "gpu-softmax", "--profile", "dev"]) == 2
    err = capsys.readouterr().err
    assert "family 'gpu-softmax' cannot run on backend 'interpret'" in err
    assert "has no jax.experimental.pallas.ops.gpu.softmax" in err
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "DOES NOT IMPORT" not in out
    assert out.count("(needs jax <= 0.12.0.1: the installed jax") == 5
    assert main(["describe", "gpu-norm"]) == 0
    assert "backends: none here (needs jax <= 0.12.0.1" in capsys.readouterr().out
    case = ('{"dtype":"float32","seed":1,"batch":1,"heads":2,"q_len":64,"kv_len":64,'
            '"head_dim":32,"causal":true}')
    assert main(["export-repro", "gpu-mha", "--case", case, "--out", str(tmp_path / "r.py")]) == 2
    assert "has no jax.experimental.pallas.ops.gpu.attention" in capsys.readouterr().err
    from kernel_harness.families.gpu_softmax import kernel

    with pytest.raises(ImportError, match="softmax.softmax needs jax <= 0.12.0.1"):
        kernel.softmax(jax.numpy.ones((2, 3)))


SCRATCH = {
    "test_plain.py": "def test_plain():\n    pass\n",
    "test_marked.py": "import pytest\n\n@pytest.mark.triton_ops\ndef test_marked():\n"
                      "    from jax.experimental.pallas.ops.gpu import softmax  # noqa: F401\n",
    "tests/families/gpu_softmax/test_in_path.py":
        "def test_in_path():\n    from jax.experimental.pallas.ops.gpu import softmax  # noqa\n",
    "test_imports_ops.py": "from jax.experimental.pallas.ops.gpu import softmax  # noqa: F401\n\n"
                           "def test_uses_them():\n    pass\n",
    "test_broken.py": "import no_such_module_anywhere  # noqa: F401\n\ndef test_never():\n"
                      "    pass\n",
    "test_by_family.py": "import pytest\n\n@pytest.mark.parametrize('name', ['gpu-softmax', "
                         "'splash'])\ndef test_family(name):\n    if name == 'gpu-softmax':\n"
                         "        from jax.experimental.pallas.ops.gpu import softmax  # noqa\n",
}


def test_the_suite_skips_what_needs_the_ops_with_the_reason_and_nothing_else(tmp_path):
    """The repository conftest on a scratch project: on a jax without the ops, a marked test,
    a test under TRITON_OPS_TESTS, a test parametrised by a gpu family and a module importing
    the ops are skipped with the reason naming the stack and the ops; with them, they run.
    Another import error stays an error."""
    (tmp_path / "conftest.py").write_text((ROOT / "conftest.py").read_text())
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n  nightly: n\n  slow: s\n")
    for rel, text in SCRATCH.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    env = {k: v for k, v in os.environ.items() if k != "KERNEL_HARNESS_TEST_COMPILE_CACHE"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p",
                           "no:cacheprovider", "-rs", "-q", "--continue-on-collection-errors"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
                          timeout=300)
    out = proc.stdout
    assert "1 error" in out and "test_broken.py" in out, out
    if MISSING:
        assert "2 passed, 4 skipped, 1 error" in out, out  # test_plain, test_family[splash]
        assert out.count(f"this stack (Python {sys.version_info.major}."
                         f"{sys.version_info.minor}, jax {jax.__version__}) lacks") == 4, out
        assert "has no attention, decode_attention" in out
        assert "test_imports_ops.py does not import here" in out
    else:
        assert "6 passed, 1 error" in out, out
