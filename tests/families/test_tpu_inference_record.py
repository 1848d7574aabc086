"""families/tpu_inference/record.py: what every tpu-inference family writes alike, once."""

from __future__ import annotations

import inspect

import pytest

from kernel_harness.families.tpu_inference import loader as tpu_inference_loader
from kernel_harness.families.tpu_inference.loader import TESTED_VERSION
from kernel_harness.families.tpu_inference.modules import KernelModules, loader_source
from kernel_harness.families.tpu_inference.mutants import tpu_inference_edits
from kernel_harness.families.tpu_inference.record import REQUIRES, tpu_inference_family
from kernel_harness.records.registry import BUILTIN_FAMILIES, get_family
from tests.helpers.toy_family import FAMILY as TOY

FAMILIES = [n for n in BUILTIN_FAMILIES if n.startswith("tpu-inference-")]


def test_the_record_says_release_needs_install_and_one_kernel() -> None:
    adapter_fields = {k: getattr(TOY, k) for k in ("kernel", "impl_signature", "run",
                                                      "backends")}

    class Adapter:
        def fields(self) -> dict:
            return adapter_fields

    family = tpu_inference_family(
        summary="a toy matmul", adapter=Adapter(), needs="tpu-inference and sympy",
        name="toy-ti", case_type=TOY.case_type, cases=TOY.cases, reference=TOY.reference,
        output_axes=TOY.output_axes, tolerances=TOY.tolerances)
    assert family.summary == f"tpu-inference {TESTED_VERSION} a toy matmul; needs " \
        "tpu-inference and sympy"
    assert family.requires == REQUIRES and family.kernels.forward == 1
    assert family.capabilities == frozenset() and family.run is TOY.run


def test_every_tpu_inference_family_is_built_by_it() -> None:
    for name in FAMILIES:
        family = get_family(name)
        assert family.summary.startswith(f"tpu-inference {TESTED_VERSION} "), name
        assert "pip install --no-deps tpu-inference==" in family.requires, name
        assert family.kernels is not None and family.kernels.forward == 1, name


def test_kernel_modules_say_what_to_install_or_which_name_is_wrong() -> None:
    absent = KernelModules("quantized_matmul.kernel", available=False, missing="install x")
    assert absent == {} and absent.backends == frozenset()
    with pytest.raises(ImportError, match="install x"):
        absent["kernel"]
    if tpu_inference_loader.available():
        present = KernelModules("quantized_matmul.kernel")
        assert set(present) == {"kernel"} and present.backends
        with pytest.raises(KeyError, match="'kernal' is not among the loaded modules"):
            present["kernal"]


def test_mutant_edits_name_the_kernel_module() -> None:
    mutant = tpu_inference_edits("quantized_matmul.kernel")("a", "b", "old", "new")
    assert mutant.module == "tpu_inference.kernels.quantized_matmul.kernel"


def test_an_exported_script_embeds_the_loader_then_its_kernel() -> None:
    source = loader_source("\n    KERNEL = kernel_module('x.y')\n")
    assert source.index("def kernel_module") < source.index("KERNEL = kernel_module('x.y')")
    assert "\nKERNEL = " in source  # dedented
    assert source.startswith(inspect.getsource(tpu_inference_loader)[:200])
