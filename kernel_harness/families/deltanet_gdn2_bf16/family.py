"""The deltanet-tpu-gdn2-bf16 family: deltanet-tpu 0.3.0's ``chunk_gdn2`` in its default
``precision="bf16"`` (bfloat16 matmul operands and intra-chunk matrices, float32
accumulation and state), float32 inputs, judged against the delta-rule op's token-serial
reference with bfloat16-sized tolerances. Everything but the precision, the tolerances and
the goldens is the fp32 family's (:mod:`kernel_harness.families.deltanet_gdn2.family`)."""

from __future__ import annotations

import dataclasses
import functools

from hypothesis import strategies as st

from kernel_harness.core.tolerance import SliceFloor, Tolerance, ToleranceTable
from kernel_harness.families.deltanet_gdn2 import family as _fp32
from kernel_harness.families.deltanet_gdn2 import kernel as _kernel
from kernel_harness.families.deltanet_gdn2.export import export
from kernel_harness.ops.delta_rule.cases import DeltaRuleCase
from kernel_harness.ops.delta_rule.strategy import delta_rule_cases

_BF16 = (
    "float32 inputs, precision='bf16': every matmul operand rounded to bfloat16 (2^-9 = "
    "2e-3 relative) and the chunk's intra-chunk matrices kept in bfloat16, products summed "
    "in float32 over K = 128 and 128-token chunks, the triangular solve on bfloat16 "
    "matrices; worst seen {obs} of the scale ({row} in one row, 1/4 floor) over 14 drawn "
    "cases, every decay regime (interpret, jax 0.12.0.1, 2026-12-05); 3e-2 is 2.4x the "
    "worst row. A dropped chunk state, a lost reset or a missing decay errs 0.2 to 1 (the "
    "fp32 family's mutants)"
)

#: (output) -> worst observed relative error of the pristine kernel in bf16 mode: over the
#: output's scale, and in one row (slice) with the 1/4 floor.
_OBSERVED: dict[str, tuple[str, str]] = {
    "out": ("5.9e-3", "9.9e-3"), "final_state": ("5.5e-3", "8.3e-3"),
    "dq": ("3.8e-3", "1.2e-2"), "dk": ("3.5e-3", "1.2e-2"), "dv": ("5.7e-3", "8.9e-3"),
    "dg": ("4.0e-3", "1.2e-2"), "db": ("4.5e-3", "1.2e-2"), "dw": ("5.2e-3", "8.6e-3"),
    "dh0": ("4.3e-3", "6.4e-3")}

#: A token's row sums K x V bfloat16-rounded products that cancel: its rounding follows the
#: terms (the global scale), not the row's size.
ROW_FLOOR = SliceFloor(1 / 4, (
    "bf16 delta-rule rows: a token's out or gradient row sums K x V bfloat16-rounded "
    "products that cancel, so its error follows the summed terms, not its own size: "
    "2.4e-2 of a row's own scale (dq) at a 1/16 floor over 14 cases (issue 57 saw a false "
    "FAIL of 2.2e-2 > 2e-2 with the float32 floors); 1/4 keeps rows judged "
    "by the terms' scale, and a 10% error in a row at 1/10 of the global scale still "
    "fails 3e-2"))

TOLERANCES = ToleranceTable({
    ("float32", out): Tolerance(max_rel_err=3e-2, reason=_BF16.format(obs=obs, row=row),
                                slice_floor=ROW_FLOOR)
    for out, (obs, row) in _OBSERVED.items()})

CONTRACT = _fp32.CONTRACT.replace('precision="fp32"', 'precision="bf16"').replace(
    "- Drawn: float32 inputs only (precision='fp32' is the mode judged here; the library's\n"
    "  default 'bf16' is the family deltanet-tpu-gdn2-bf16),",
    "- Drawn: float32 inputs only (precision='bf16', the library's default, judged with\n"
    "  bfloat16-sized tolerances; precision='fp32' is the family deltanet-tpu-gdn2),")

def cases(*, without: frozenset[str] = frozenset()) -> st.SearchStrategy[DeltaRuleCase]:
    """The fp32 family's draws with independent keys only: the bounds above were set from
    them, and keys near one direction with b near 1 (an ill-conditioned chunk) take
    bfloat16 rows to 3.5e-2 of their scale (dq, dg, db; 26 ci cases, interpret, jax 0.12.1),
    which a fixed bound cannot tell from a defect; the fp32 family draws them."""
    return delta_rule_cases(chunk_sizes=(_fp32.CHUNK,), key_dims=(_fp32.HEAD_DIM,),
                            value_dims=(_fp32.HEAD_DIM,), qk_l2norm=(True, False),
                            key_layouts=("independent",), without=without)


FAMILY = dataclasses.replace(
    _fp32.FAMILY,
    name="deltanet-tpu-gdn2-bf16",
    summary="deltanet-tpu 0.3.0 chunk_gdn2 in its default precision='bf16' (GDN-2 delta "
            "rule, forward and backward)",
    **_kernel.ADAPTER_BF16.fields(),
    cases=cases,
    modes=_fp32.FAMILY.modes - {"keys:correlated"},
    tolerances=TOLERANCES,
    contract=CONTRACT,
    export=functools.partial(export, precision="bf16"),
)
