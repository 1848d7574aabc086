"""Standalone repro source for one torch-sdpa case (``kernel-harness export-repro``).

The script runs the torch callable directly (torch tensors, ``torch.autograd.grad`` with
the case's cotangent, the case's SDPA kernel pinned by ``sdpa_kernel``): no JAX bridge.
It needs torch; where ``import torch`` fails it says so, with the install command, and
exits 2 (it could not run the kernel), never 1 (a finding). The reference is the
attention op's own source (:func:`kernel_harness.ops.attention.export.reference_source`)
in torch's layout.
"""

from __future__ import annotations

from kernel_harness.families.torch_sdpa.cases import TorchSdpaCase
from kernel_harness.families.torch_sdpa.kernel import mask_has_gradient
from kernel_harness.ops.attention.export import call_source
from kernel_harness.ops.attention.record import definition
from kernel_harness.records.export import ExportSnippet

#: What the script prints (to stderr, exit 2) when torch does not import.
TORCH_MISSING = (
    "torch-sdpa repro: this script runs torch's scaled_dot_product_attention and needs "
    "torch, which does not import here ({error}); install it, e.g. the CPU wheel: "
    "pip install torch --index-url https://download.pytorch.org/whl/cpu"
)

_DEFAULT = '''
def kernel(query, key, value, attn_mask=None, *, is_causal, scale, enable_gqa):
    """torch.nn.functional.scaled_dot_product_attention (torch is imported below)."""
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale,
        enable_gqa=enable_gqa)
'''

_SDPA_KERNELS = {"math": "MATH", "flash": "FLASH_ATTENTION"}


def export(case: TorchSdpaCase) -> ExportSnippet:
    """The torch call with the case's exact options and pinned kernel, forward and
    autograd backward, and its reference (bool mask and causal as visibility, a float mask
    as the additive bias after scaling; rows that see no key give 0, as torch does)."""
    grads = ("dq", "dk", "dv", "dmask") if mask_has_gradient(case) else ("dq", "dk", "dv")
    missing = TORCH_MISSING.format(error="{_e}")
    run_kernel = f'''
        try:
            import torch
            from torch.nn.attention import SDPBackend, sdpa_kernel
        except ImportError as _e:
            print(f"{missing}", file=sys.stderr)
            sys.exit(2)

        OPTIONS = dict(is_causal={case.is_causal}, scale={case.scale!r},
                       enable_gqa={case.enable_gqa})
        SDPA_KERNEL = SDPBackend.{_SDPA_KERNELS[case.backend]}  # the case's torch kernel
        OUTPUTS = {("out", *grads)!r}


        def to_torch(a):
            a = np.asarray(a)
            if a.dtype.name == "bfloat16":  # numpy has no bfloat16: through its bits
                return torch.from_numpy(a.view(np.uint16).copy()).view(torch.bfloat16)
            return torch.from_numpy(a.copy())


        def run_kernel(x):
            q, k, v = (to_torch(x[n]).requires_grad_() for n in ("query", "key", "value"))
            mask = to_torch(x["mask"]) if "mask" in x else None
            wrt = (q, k, v)
            if "dmask" in OUTPUTS:  # a float mask's gradient (the math kernel only)
                wrt = (q, k, v, mask.requires_grad_())
            with sdpa_kernel(SDPA_KERNEL):
                out = kernel(q, k, v, mask, **OPTIONS)
            grads = torch.autograd.grad(out, wrt, to_torch(x["do"]))
            return {{n: t.detach().float().numpy()
                     for n, t in zip(OUTPUTS, (out, *grads), strict=True)}}
    '''
    bool_mask = 'jnp.asarray(x["mask"])' if case.mask is not None else "None"
    names = {"q": "query", "k": "key", "v": "value", "do": "do"} | (
        {"bias": "mask"} if case.bias is not None else {})
    reference = call_source(
        definition(case),
        vis=f"visibility({case.q_len}, {case.kv_len}, causal={case.is_causal}, mask={bool_mask})",
        arrays={op: f'x["{name}"]' for op, name in names.items()},
        outputs={"out": "out", "dq": "dq", "dk": "dk", "dv": "dv"}
        | ({"dbias": "dmask"} if case.bias is not None else {}),
        doc="Softmax attention in float32, HIGHEST, torch's layout; masked keys get exactly "
        "zero weight, rows that see no key give 0. GQA: head n reads kv head "
        f"n // {case.q_heads // case.kv_heads}.")
    return ExportSnippet(default_import=_DEFAULT, run_kernel=run_kernel, reference=reference,
                         outputs=("out", *grads))
