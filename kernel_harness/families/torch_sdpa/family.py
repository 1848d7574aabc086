"""The ``torch-sdpa`` family: ``torch.nn.functional.scaled_dot_product_attention`` (or a
torch wrapper of its signature, ``--impl``) under JAX, against the attention reference."""

from __future__ import annotations

from kernel_harness.core.tolerance import Tolerance, ToleranceTable, standard_floor
from kernel_harness.families.torch_sdpa import kernel as _kernel
from kernel_harness.families.torch_sdpa.cases import (
    TorchSdpaCase,
    config,
    config_events,
    torch_sdpa_seed_cases,
)
from kernel_harness.families.torch_sdpa.export import export
from kernel_harness.families.torch_sdpa.kernel import TORCH_BACKENDS
from kernel_harness.ops.attention.record import problem_record
from kernel_harness.records.family import Family
from kernel_harness.records.outside import OutsideKernel

CONTRACT = """\
torch.nn.functional.scaled_dot_product_attention (no dropout), forward and torch.autograd
backward, run under JAX by kernel_harness.core.torch_bridge (pure_callback + custom_vjp).
- Layout (batch, heads, seq, dim); enable_gqa = (kv_heads != heads): query head n reads
  kv head n // (heads / kv_heads).
- logits = scale * q.k^T (+ a float attn_mask, after scaling); scale defaults to
  1/sqrt(head_dim). A bool attn_mask: True = attend.
- is_causal is top-left aligned: query i sees key j <= i, whatever q_len and kv_len are.
  torch refuses attn_mask with is_causal, so no case has both.
- A row that sees no key (a bool mask row all False) gives exactly 0 in out and in the
  gradients: inside the contract (jax.nn.dot_product_attention gives mean(v) there).
- The case's `backend` pins torch's kernel with torch.nn.attention.sdpa_kernel: math or
  flash (CPU: both; GPU: CUDA tensors, untested here). dmask (the float mask's gradient) is
  compared for the math kernel only: torch's flash kernel has no mask gradient.
- Needs torch (pip install 'kernel-harness[torch]'); without it the family has no backend.
"""


def _tol(x: float, why: str, dtype: str, output: str) -> Tolerance:
    # out is judged by its own size; dq/dk/dv/dmask rows sum rounded products (the
    # gradient floors), as for the sdpa family.
    return Tolerance(max_rel_err=x, reason=why,
                     slice_floor=standard_floor(dtype, gradient=output != "out"))


_F32 = ("float32, torch's CPU kernels at full precision; worst observed {obs} over 60 cases "
        "(scripts/torch_sdpa_errors.py, torch 2.13 CPU; the flash kernel's gradients are the "
        "largest; issue 26: <= 1.3e-6), the sdpa family's limit, >= 10x above")
_BF16 = ("bf16 in, bf16 out (1x logits); worst observed {obs} over 60 cases (torch 2.13 CPU; "
         "issue 26 on torch 2.9-2.15: out 1.5-3.8e-3 math, flash dk/dv up to 9.8e-3/8.3e-3 "
         "with GQA), limit ~3x the issue's worst")

#: (dtype, output) -> (limit, reason).
_LIMITS = {
    ("float32", "out"): (1e-4, _F32.format(obs="1.0e-6")),
    ("float32", "dq"): (2e-4, _F32.format(obs="8.8e-6")),
    ("float32", "dk"): (2e-4, _F32.format(obs="6.6e-6")),
    ("float32", "dv"): (1e-4, _F32.format(obs="6.9e-6")),
    ("float32", "dmask"): (2e-4, _F32.format(obs="4.3e-7")),
    ("bfloat16", "out"): (1.5e-2, _BF16.format(obs="3.3e-3")),
    ("bfloat16", "dq"): (3e-2, _BF16.format(obs="5.4e-3")),
    ("bfloat16", "dk"): (3e-2, _BF16.format(obs="5.6e-3 (flash, GQA)")),
    ("bfloat16", "dv"): (3e-2, _BF16.format(obs="6.3e-3 (flash, GQA)")),
    ("bfloat16", "dmask"): (3e-2, _BF16.format(obs="2.1e-3")),
}
TOLERANCES = ToleranceTable({(d, o): _tol(x, why, d, o) for (d, o), (x, why) in _LIMITS.items()})


def _not_compared(case: TorchSdpaCase) -> dict[str, str]:
    """torch's flash kernel differentiates no float attn_mask (the op leaves out dmask
    where the case has none)."""
    if case.bias is not None and case.backend == "flash":
        return {"dmask": "torch's flash kernel gives no attn_mask gradient"}
    return {}


FAMILY = Family(
    name="torch-sdpa",
    summary="torch.nn.functional.scaled_dot_product_attention (math/flash kernels) under JAX "
    "via pure_callback + torch.autograd; needs torch ('kernel-harness[torch]')"
    + ("" if TORCH_BACKENDS else " -- torch is not importable here: no backend"),
    **problem_record(TorchSdpaCase, config=config, config_events=config_events,
                     config_not_compared=_not_compared),
    **_kernel.ADAPTER.fields(),
    tolerances=TOLERANCES,
    capabilities=frozenset({"causal", "full", "numpy-mask", "gqa", "mqa", "bias", "sm-scale",
                            "q-len-ne-kv-len", "gradients"}),
    contract=CONTRACT,
    seed_cases=torch_sdpa_seed_cases,
    export=export,
    requires="torch: pip install 'kernel-harness[torch]'",
    outside_kernel=OutsideKernel(by_design=(
        "torch's scaled_dot_product_attention through a pure_callback: the whole op is "
        "torch, no Pallas kernel by design")),
)
