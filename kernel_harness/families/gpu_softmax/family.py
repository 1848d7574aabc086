"""The gpu-softmax family: the Pallas GPU (Triton) softmax kernel (forward only).

Kept apart from ``gpu-norm`` (layer_norm, rms_norm) because a family's outputs are the
same for every case: softmax produces one output and has no backward kernel, while the
norms produce out, dx, dweight and dbias.
"""

from __future__ import annotations

from kernel_harness.core.elements import ElementBound
from kernel_harness.core.tolerance import Calibrated, ToleranceTable
from kernel_harness.families.gpu_common import is_pow2, triton_requires
from kernel_harness.families.gpu_softmax import kernel as _kernel
from kernel_harness.families.gpu_softmax.export import export
from kernel_harness.ops.softmax.cases import (
    LANES,
    LOGITS,
    SoftmaxCase,
    aimed_cases,
    softmax_cases,
    softmax_data_draws,
)
from kernel_harness.ops.softmax.reference import (
    KERNEL_CORE,
    low_precision_reference,
    reference,
)
from kernel_harness.ops.softmax.relations import RELATIONS
from kernel_harness.records.family import Family
from kernel_harness.records.hooks import Metamorphic
from kernel_harness.records.kernels import KernelExpectation
from kernel_harness.records.outside import OutsideKernel

_SEEN = "worst seen {} over 200 interpret cases, each row against its own max"

#: bfloat16/float16: the calibrated judge, against one rounding of x - max and of p.
CALIBRATED = {
    "bfloat16": Calibrated(multiple=2.0, floor=2.0**-10, reason=(
        "2x the low-precision twin (x - max and p each rounded once to bfloat16, exp and "
        "sum exact): the kernel rounds at the same two places (exp/sum/divide in float32), "
        "pristine worst usage 0.44, ratio 1.0 over 60 interpret cases; floor 2^-10 of the "
        "(row) scale, a quarter of one bfloat16 rounding, for rows whose twin happens to be "
        "exact. A denominator accumulated in bfloat16 (one rounding per added term) reaches "
        "usage 248 and fails 30 of those 60 cases (the rows long enough to round)")),
    "float16": Calibrated(multiple=2.0, floor=2.0**-12, reason=(
        "as bfloat16 with float16's rounding (floor 2^-12, a quarter of one float16 "
        "rounding); pristine worst usage 0.38, ratio 1.0 over 60 interpret cases")),
}

#: Each probability judged by its own size too: the row-scaled bounds let a kernel flush
#: or coarsen the tail (a probability 2^-18 of the row's largest, set to 0, errs 2^-18 of
#: the row's scale); sampling and a later log read those probabilities.
_ELEMENT_LOWP = ("1 ulp of the stored probability (the final rounding, which may fall the "
                 "other way from the twin's) + 2x the twin's error at that very element "
                 "(its rounding of x - max): pristine worst {} (interpret, jax 0.10.2); a tail "
                 "flushed to 0 errs 2^7 ulp or more")
ELEMENTS = {
    ("bfloat16", "out"): ElementBound(ulps=1.0, floor=0.0, calibrated=True, reason=(
        _ELEMENT_LOWP.format("0.5 ulp, 0 beyond 2x the twin, in 25 cases"))),
    ("float16", "out"): ElementBound(ulps=1.0, floor=0.0, calibrated=True, reason=(
        _ELEMENT_LOWP.format("3.6 ulp, 0 beyond 2x the twin, in 20 cases"))),
    ("float32", "out"): ElementBound(ulps=128.0, floor=0.0, reason=(
        "x - max rounded in float32 moves a probability by 2^-24 |x - max| of itself, and "
        "only |x - max| < 104 leaves one above float32's range: at most 104 ulp, then exp's "
        "and the division's few; pristine worst 5 ulp in 15 interpret cases. A tail "
        "flushed to 0 errs 2^23 ulp, bfloat16 probabilities 2^14")),
}

# The fixed low-precision bounds stay for the checks without the twin at hand (metamorphic
# ones).
TOLERANCES = ToleranceTable.of_limits({
    ("float32", "out"): (5e-6, "float32 exp and sum, one division; " + _SEEN.format("2.9e-7")
                         + "; a float32 kernel storing bfloat16 probabilities errs ~2e-3"),
    ("bfloat16", "out"): (1e-2, "x - max is taken in bfloat16 (exact for logits within a "
                          "factor 2 of the max, else 2^-9 |x - max| in the exponent, where p "
                          "<= e^-|x-max|), exp/sum/divide in float32, stored in bfloat16 "
                          "(2^-9); " + _SEEN.format("3.5e-3")),
    ("float16", "out"): (1.5e-3, "as bfloat16 with float16's 2^-11 rounding; "
                         + _SEEN.format("4.2e-4")),
}, calibrated=CALIBRATED, per_element=ELEMENTS)

CONTRACT = """\
softmax.softmax(x, axis=-1) (jax.experimental.pallas.ops.gpu): x [*leading, n], any
number of leading axes (one vmap each; none: the row is the whole call), the softmax
over the last axis only (another axis raises NotImplementedError).
- One block of next_pow2(n) lanes per row; lanes past n load -inf (they add exp(-inf)
  = 0 and cannot be the max) and are not stored. Rows of any length are drawn, 1 to 1025.
- The max is subtracted before exp, so logits offset by +-1000 or spread by 1e4 do not
  overflow; x - max is computed in the input dtype, then exp, sum and the division in
  float32, and the result stored in the input dtype.
- Masked logits: about half the drawn cases start every row with -inf (a masked prefix, as
  attention and sampling feed a softmax), up to all but the last logit or a whole leading
  128-lane block; their probabilities are exactly 0. A row of only -inf has no softmax and
  is never drawn. Masked suffixes (the row's last logits -inf, as a decoder's attention
  rows end) and masked blocks anywhere inside a row are drawn too, alone or together.
- Tied maxima: about two cases in five set 2, several or all of each row's unmasked
  logits to the row's max exactly (clamped logits, a constant fill); float32 included,
  where random logits never tie.
- Every element of out is compared (out comes back as [rows, n], a reshape); each row
  is judged against its own largest probability as well as the global one.
- Forward only: the module has no backward kernel, and jax.vjp of it fails (jax 0.10.2:
  "Linearization failed to produce known values for all output primals"), so there are
  no gradients to compare.
"""


def _events(case: SoftmaxCase) -> list[str]:
    ev = [case.dtype, f"rank-{len(case.leading) + 1}"]
    ev.append("pow2-n" if is_pow2(case.n) else "partial-block")
    if case.n == 1:
        ev.append("n=1")
    if (case.offset, case.scale) not in LOGITS[case.dtype]:
        ev.append("logits-anywhere")
    if abs(case.offset) >= 300:
        ev.append("large-offset")
    if case.scale >= 30:
        ev.append("large-logits")
    if case.masked_prefix:
        ev.append("masked-prefix")
        if case.masked_prefix >= LANES and case.n > LANES:
            ev.append("masked-leading-block")
    if case.masked_suffix:
        ev.append("masked-suffix")
    if case.masked_block[1]:
        ev.append("masked-block")
    if case.tied_max:
        ev.append("tied-max")
    if case.masked_rows:
        ev.append("masked-row")
    return sorted(set(ev))


FAMILY = Family(
    name="gpu-softmax",
    summary="Pallas GPU (Triton) softmax over the last axis (forward; no backward kernel)",
    case_type=SoftmaxCase,
    cases=softmax_cases,
    aimed=aimed_cases,
    data_draws=softmax_data_draws,
    **_kernel.ADAPTER.fields(),
    # No backend on a jax without the op (jax >= 0.12.1): list and check say why.
    requires=triton_requires(_kernel.OPS),
    kernels=KernelExpectation(forward=1, forward_computes=KERNEL_CORE),
    outside_kernel=OutsideKernel(layout_only=(
        "jax's softmax wrapper only reshapes around its kernel")),
    reference=reference,
    low_precision_reference=low_precision_reference,
    output_axes={"out": ("row", "dim")},
    tolerances=TOLERANCES,
    capabilities=frozenset(),
    events=_events,
    contract=CONTRACT,
    # No queries and keys: deterministic, finite-out (x scaled) and the op's relations.
    metamorphic=Metamorphic(roles={}, logit_input="x"),
    relations=RELATIONS,
    claimed=_kernel.CLAIM,
    export=export,
    modes=frozenset({"partial-block", "pow2-n", "n=1", "large-offset", "large-logits",
                     "rank-1", "rank-6", "float32", "bfloat16", "float16", "masked-prefix",
                     "masked-leading-block", "masked-suffix", "masked-block", "tied-max",
                     "masked-row"}),
    nondegenerate={"tied-max": (
        "float32: random bfloat16/float16 logits tie at a row's max on their own, float32 "
        "ones never do", lambda case: case.dtype == "float32")},
)
