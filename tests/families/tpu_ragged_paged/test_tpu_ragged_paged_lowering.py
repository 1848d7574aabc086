"""lowers-for-tpu for tpu-ragged-paged: the kernel's Mosaic lowering asks the TPU generation
(jnp.sign's rule), so it is lowered for a named chip (TPU v6e); without one it is not
checkable here (never a pass), and a planted epilogue kernel whose 3-row block interpret
mode accepts but Mosaic rejects fails the property."""

from __future__ import annotations

import dataclasses

import jax
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from jax.experimental import pallas as pl

from kernel_harness.checks import lowering
from kernel_harness.core.backends import resolve_backend
from kernel_harness.families.tpu_ragged_paged import kernel
from kernel_harness.families.tpu_ragged_paged.family import FAMILY
from kernel_harness.run.runner import check_case
from tests.helpers.golden_export import first_golden_case


def _copy(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def three_row_epilogue(*operands, **options):
    """The real kernel, then an identity epilogue over blocks of 3 token rows: right
    values, but a block Mosaic cannot lower (rows not a multiple of 8)."""
    out = kernel.ragged_paged_attention(*operands, **options)
    rows = out.reshape(out.shape[0], -1)
    copied = pl.pallas_call(
        _copy, grid=(rows.shape[0] // 3,),
        in_specs=[pl.BlockSpec((3, rows.shape[1]), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((3, rows.shape[1]), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(rows.shape, rows.dtype))(rows)
    return copied.reshape(out.shape)


def test_the_golden_case_lowers_for_the_named_chip_and_is_not_checkable_without_one():
    case = first_golden_case("tpu-ragged-paged")
    assert FAMILY.metamorphic.tpu_device_kind == "TPU v6 lite"
    result = lowering.lower_case(FAMILY, case)
    assert result.ok and result.custom_calls == 1, result.error
    anonymous = dataclasses.replace(
        FAMILY, metamorphic=dataclasses.replace(FAMILY.metamorphic, tpu_device_kind=None))
    blind = lowering.lower_case(anonymous, case)
    assert not blind.ok and blind.needs_tpu, blind.error


def test_a_block_interpret_accepts_but_mosaic_rejects_fails_the_property():
    case = first_golden_case("tpu-ragged-paged")
    assert case.max_tokens % 3 == 0 and case.max_tokens % 8
    assert check_case(FAMILY, case, resolve_backend("interpret"),
                      impl=three_row_epilogue).passed
    result = lowering.lower_case(FAMILY, case, three_row_epilogue)
    assert not result.ok and not result.needs_tpu
    assert "divisible by 8" in result.error, result.error
    fixed = dataclasses.replace(FAMILY, cases=lambda: st.just(case))
    prop = lowering.lowers_for_tpu(fixed, backend=resolve_backend("interpret"),
                                   impl=three_row_epilogue)
    with pytest.raises(lowering.LoweringFailure, match="does not lower for TPU"):
        settings(max_examples=1, database=None, suppress_health_check=list(HealthCheck))(prop)()
