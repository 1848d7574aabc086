"""The quantized matmul op's reference as embedded in an exported script: the op's own
quantization and exact product, verbatim (one source for the family and the script)."""

from __future__ import annotations

import inspect
import textwrap

from kernel_harness.ops.quantized_matmul import quantize as _quantize
from kernel_harness.ops.quantized_matmul import reference as _reference
from kernel_harness.ops.quantized_matmul.cases import QmmCase
from kernel_harness.records.export import module_source

#: The case fields the embedded reference reads.
_FIELDS = ("n_batch", "n_in", "n_out", "group", "x_q_dtype", "w_q_dtype", "scale_block")


def reference_source(case: QmmCase, rounding: str) -> str:
    """Code defining ``reference(x)`` for ``case``: :func:`~.reference.exact_product` with
    int8 activations rounded by ``rounding``, as float32."""
    fields = {name: getattr(case, name) for name in _FIELDS}
    return "\n\n".join([
        module_source(_quantize),
        "from typing import Any\n\nQmmCase = Any",
        inspect.getsource(_reference.grouped_operands),
        inspect.getsource(_reference.exact_product),
        textwrap.dedent(f'''
            import types

            CASE = types.SimpleNamespace(**{fields!r})


            def reference(x):
                """The exact product, x quantized per group ({rounding} for int8)."""
                return dict(out=exact_product(CASE, x, {rounding!r}).astype(np.float32))
        ''')])
