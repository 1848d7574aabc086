"""Splash's masks as its cases state them: one mask string per head (or one for all
heads, :meth:`~kernel_harness.families.splash.cases.SplashCase.head_masks`) in the
attention op's mask language (:mod:`kernel_harness.ops.attention.masks`), and segment
ids."""

from __future__ import annotations

from typing import Any

import numpy as np

from kernel_harness.ops.attention.masks import visible_keys


def _mask_key(case: Any) -> tuple[Any, ...]:
    return (case.head_masks(), case.q_len, case.kv_len, case.q_segments, case.kv_segments)


def allowed_mask(case: Any) -> np.ndarray:
    """[q_heads, q_len, kv_len]: which key each query of each head may see
    (static mask and segment ids together)."""
    return visible_keys(_mask_key(case))


def empty_rows(case: Any) -> np.ndarray:
    """[q_heads, q_len]: rows that see no key at all."""
    return ~allowed_mask(case).any(axis=-1)
