"""The scaled-dot-product-attention call's case: what ``jax.nn.dot_product_attention``
(family sdpa) and ``torch.nn.functional.scaled_dot_product_attention`` (torch-sdpa) both
take (shapes with grouped kv heads, the causal flag, an optional random boolean mask, an
explicit or default scale), written once; each family adds its own options and layout.
"""

from __future__ import annotations

import dataclasses
import math

from kernel_harness.core.case import Case, check_logit_scale, check_sizes
from kernel_harness.ops.attention.vocabulary import Shape


@dataclasses.dataclass(frozen=True, kw_only=True)
class SdpaCall(Shape, Case):
    """One SDPA call and its vjp.

    Attributes:
      batch, q_heads, kv_heads, q_len, kv_len, head_dim: the op's :class:`~kernel_harness.
        ops.attention.vocabulary.Shape` (fewer kv heads: grouped-query attention, one:
        multi-query).
      is_causal: top-left causal mask (query i sees key j <= i).
      mask: None or the kind of the call's mask (each family names its kinds).
      mask_keep: probability that a random boolean mask element is True.
      scale: explicit ``scale``, or None for the default ``1/sqrt(head_dim)``.
      logit_scale: multiple of the O(1) logit scale: q is drawn so that the logits
        (``scale * q.k``) are ~N(0, logit_scale**2); see ``core.case.LOGIT_SCALES``.
    """

    is_causal: bool = False
    mask: str | None = None
    mask_keep: float = 0.7
    scale: float | None = None
    logit_scale: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        check_logit_scale(self.logit_scale)
        check_sizes(self, "batch", "q_len", "kv_len", "head_dim")
        if not 0.0 < self.mask_keep <= 1.0:
            raise ValueError(f"mask_keep must be in (0, 1], got {self.mask_keep}")
        if self.scale is not None and not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"scale must be positive and finite, got {self.scale}")

    @property
    def effective_scale(self) -> float:
        """The scale the call applies: ``scale``, else ``1/sqrt(head_dim)``."""
        return 1.0 / math.sqrt(self.head_dim) if self.scale is None else self.scale

    @property
    def q_scale(self) -> float:
        """What standard-normal queries are multiplied by so that ``scale * q.k`` is
        ~N(0, logit_scale**2) whatever the scale is."""
        return self.logit_scale / (math.sqrt(self.head_dim) * self.effective_scale)
