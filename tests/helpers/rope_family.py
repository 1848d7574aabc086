"""The rope kernel as a family of the row-wise op: the <= 40-line family of issue 41 (a
user's blocked elementwise op gets matches-reference, block-size-invariance, deterministic
and finite-out), plus its invalid configurations."""

import jax.numpy as jnp

from kernel_harness import BadInput, Operand, RowwiseCase, half, rowwise_family
from tests.helpers.rope_kernel import rope


class RopeCase(RowwiseCase):
    """x [rows, width]; cos, sin [rows, width / 2] (per-row tables, not differentiated)."""

    OPERANDS = {"x": Operand(),
                "cos": Operand(cols=half, differentiable=False),
                "sin": Operand(cols=half, differentiable=False)}
    WIDTH_MULTIPLE = 2


def rope_reference(x, cos, sin):
    """Rotate each pair (x1[j], x2[j]) by the angle whose cosine and sine the tables give."""
    h = x.shape[-1] // 2
    x1, x2 = x[:, :h], x[:, h:]
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def bad_inputs():
    """A table of the wrong width must be refused with a message naming the shapes."""
    x, t = jnp.ones((8, 8)), jnp.ones((8, 3))
    return [BadInput("tables of the wrong width", lambda: rope(x, t, t, block_rows=8),
                     r"needs cos and sin \[rows, h\]")]


FAMILY = rowwise_family(name="rope", summary="fused rotary embedding (Pallas, with backward)",
                        case_type=RopeCase, kernel=rope, reference=rope_reference,
                        widths=(2, 64, 128), backward_kernels=1, bad_inputs=bad_inputs)
