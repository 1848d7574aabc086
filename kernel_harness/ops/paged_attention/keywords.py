"""The keywords the ragged paged attention kernels share for the op's options, written once.

Every ragged kernel here (jax's ragged paged attention, tpu-inference's rpa v3, its
head-dim-64 variant and MLA v2) names the op's scale, window and cap alike, and most name
their blocks and quantization scales alike; a family's adapter builds its call's keywords
from these (in the order its kernel lists them: exported scripts print them) and adds
only its kernel's own. ``f`` is a case's static fields by name (``Case.static_key``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def attention_keywords(f: Mapping[str, Any]) -> dict[str, Any]:
    """The op's options: ``sm_scale``, ``sliding_window``, ``soft_cap``."""
    return {"sm_scale": f["sm_scale"], "sliding_window": f["sliding_window"],
            "soft_cap": f["soft_cap"]}


def passes_keywords(f: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`attention_keywords` and the prefill pass's static query length,
    ``chunk_prefill_size`` (the kernels of :mod:`.passes`)."""
    return {**attention_keywords(f), "chunk_prefill_size": f["chunk_prefill_size"]}


def block_keywords(f: Mapping[str, Any]) -> dict[str, Any]:
    """``num_kv_pages_per_block`` and ``num_queries_per_block`` from the case's
    ``kv_pages_per_block`` and ``queries_per_block``."""
    return {"num_kv_pages_per_block": f["kv_pages_per_block"],
            "num_queries_per_block": f["queries_per_block"]}


def scale_keywords(f: Mapping[str, Any]) -> dict[str, Any]:
    """A quantized cache's ``q_scale``, ``k_scale``, ``v_scale`` (:mod:`.kv_update`)."""
    return {"q_scale": f["q_scale"], "k_scale": f["k_scale"], "v_scale": f["v_scale"]}
