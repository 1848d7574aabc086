"""The scaled-dot-product-attention call's case: what ``jax.nn.dot_product_attention``
(family sdpa) and ``torch.nn.functional.scaled_dot_product_attention`` (torch-sdpa) both
take (shapes with grouped kv heads, the causal flag, an optional random boolean mask, an
explicit or default scale), written once; each family adds its own options and layout.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from kernel_harness.core.case import Case, cast, check_logit_scale, check_sizes, standard_normal
from kernel_harness.ops.attention.vocabulary import Shape, head_axis


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

    def query_shape(self, layout: str) -> tuple[int, int, int, int]:
        """query's (and do's) shape in ``layout`` (``bqhd`` or ``bhqd``)."""
        head_axis(layout)  # an unknown layout is an error, not the other one
        return ((self.batch, self.q_len, self.q_heads, self.head_dim) if layout == "bqhd"
                else (self.batch, self.q_heads, self.q_len, self.head_dim))

    def draw_qkv(self, rng: np.random.Generator, layout: str) -> dict[str, np.ndarray]:
        """query (standard normal times :attr:`q_scale`), key and value (standard normal)
        in ``layout``, drawn in that order from ``rng`` and rounded to the case's dtype."""
        kv = ((self.batch, self.kv_len, self.kv_heads, self.head_dim) if layout == "bqhd"
              else (self.batch, self.kv_heads, self.kv_len, self.head_dim))
        query = rng.standard_normal(self.query_shape(layout)) * self.q_scale
        return {"query": cast(query, self.dtype), "key": standard_normal(rng, kv, self.dtype),
                "value": standard_normal(rng, kv, self.dtype)}

    @property
    def q_scale(self) -> float:
        """What standard-normal queries are multiplied by so that ``scale * q.k`` is
        ~N(0, logit_scale**2) whatever the scale is."""
        return self.logit_scale / (math.sqrt(self.head_dim) * self.effective_scale)
