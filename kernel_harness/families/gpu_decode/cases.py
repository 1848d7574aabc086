"""The gpu-decode family's case: the attention problem (:class:`~kernel_harness.ops.
attention.problem.AttentionProblem`) as the Pallas GPU (Triton) split-k decode attention
takes it (one query per row), and its configuration.

q is ``[batch, q_heads, head_dim]``, k and v ``[batch, kv_len, kv_heads, head_dim]``; the
keys of row b are ``kv_starts[b] <= j < kv_lengths[b]`` (the kernel's ``start_idx`` and
``kv_seq_len``: an END index), each a scalar for every row or one per row. A row with no
key gives out 0 and lse -inf (checked). An explicit scale is 1.0 (q pre-scaled in the
data); without one the kernel gets ``sm_scale=None`` (its own 1/sqrt(head_dim)) or, with
``sm_scale_arg``, 1/sqrt(head_dim) passed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import DTYPES
from kernel_harness.families.gpu_common import is_pow2
from kernel_harness.ops.attention.features import Features
from kernel_harness.ops.attention.problem import AttentionProblem
from kernel_harness.records.hooks import Toggle, toggles

ENTRIES: tuple[str, ...] = ("gqa", "mqa")
_SCALE_MODES = {"default": (None, False), "arg": (None, True), "prescaled-q": (1.0, False)}


@dataclasses.dataclass(frozen=True, kw_only=True)
class DecodeCase(AttentionProblem):
    """One decode step: the attention problem with one query per row and the kernel's
    configuration.

    Attributes:
      entry: ``gqa`` or ``mqa`` (the latter needs ``kv_heads == 1``: called on the single
        kv head).
      normalize_output: the kernel's flag; when False ``out`` is sum_j exp(s_j - m) v_j
        with m the row's largest visible logit.
      sm_scale_arg: without an explicit scale, pass 1/sqrt(head_dim) as ``sm_scale``
        rather than None (the kernel's own default).
      block_h, block_k, k_splits, num_warps, num_stages: kernel tiling and launch settings.
    """

    entry: str = "gqa"
    normalize_output: bool = True
    sm_scale_arg: bool = False
    block_h: int = 16
    block_k: int = 32
    k_splits: int = 1
    num_warps: int | None = None
    num_stages: int = 2

    FEATURES = Features(
        layout="bqhd",
        names={"q": "q", "k": "k", "v": "v", "kv_starts": "start_idx",
               "kv_lengths": "kv_seq_len"},
        optional=frozenset({"kv-starts", "kv-lengths", "scale", "gqa"}),
        query_axis=False,
        scalar_bounds=True,
        empty_rows="zero",  # out 0 (0 / (l + eps)) and lse -inf
        gradients=False,
        lse="natural",
        dtypes=DTYPES,
        # Up to 4 rows and 1024 keys, 1-16 splits: round 8 of the adversarial set gathered
        # every row's bounds from row b % 2, ignored keys past 512 and scaled wrong from 8
        # splits on, where the draws stopped at 2 rows, 512 keys and 4 splits.
        max_batch=4,
        lengths=(32, 16, 64, 128, 256, 512, 1024),
        # 128: the head_dim of most models (round 6 of the adversarial set passed a kernel
        # computing q.k in bfloat16 there only, and one wrong past 4 kv heads).
        head_dims=(32, 64, 16, 128),
        # Query heads per kv head: larger than block_h and not a multiple of it too.
        kv_head_counts=(1, 2, 4, 8),
        groups=(1, 4, 16, 3, 20, 32),
        scales=(0.5, 2.0),  # any sm_scale the caller passes
        scale_span=(1 / 16, 16.0),  # and anywhere, one in four (up to 4.0 at head_dim 16)
        unit_scale=True,  # sm_scale=1.0 with q pre-scaled
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.entry not in ENTRIES:
            raise ValueError(f"entry must be one of {ENTRIES}, got {self.entry!r}")
        if self.entry == "mqa" and self.kv_heads != 1:
            raise ValueError("entry 'mqa' needs kv_heads == 1")
        for name in ("head_dim", "block_h", "block_k"):
            if not is_pow2(getattr(self, name)) or getattr(self, name) < 16:
                raise ValueError(f"{name} must be a power of two >= 16 (a Triton tile)")
        if self.k_splits < 1 or not _splits_into(self.kv_len, self.k_splits):
            raise ValueError(
                f"kv_len={self.kv_len} must split into k_splits={self.k_splits} power-of-two "
                "parts of at least 16 keys (the kernel asserts this)"
            )

    @classmethod
    def upgraded(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Cases stored before gpu-decode was on the attention problem: ``start``/``end``
        are ``kv_starts``/``kv_lengths``, ``scale_mode`` the scale (and ``sm_scale_arg``),
        and q_len is 1."""
        out = dict(data)
        for old, new in (("start", "kv_starts"), ("end", "kv_lengths")):
            if old in out:
                out[new] = out.pop(old)
        if "scale_mode" in out:
            out["scale"], out["sm_scale_arg"] = _SCALE_MODES[out.pop("scale_mode")]
        out.setdefault("q_len", 1)
        return out

    @property
    def split_len(self) -> int:
        """Keys per split."""
        return self.kv_len // self.k_splits

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Per batch row ``(start, end)``: the keys ``start <= j < end`` (0 and kv_len where
        the case gives no bound)."""
        start = self.per_row("kv_starts") or (0,) * self.batch
        end = self.per_row("kv_lengths") or (self.kv_len,) * self.batch
        return np.asarray(start), np.asarray(end)

    @property
    def sm_scale(self) -> float | None:
        """The ``sm_scale`` passed to the kernel (None: its own 1/sqrt(head_dim))."""
        if self.scale is None and not self.sm_scale_arg:
            return None
        return self.effective_scale

    def definition_options(self) -> dict[str, Any]:
        """The denominator divides the output, or not at all without
        ``normalize_output``."""
        return {"normalize": "output" if self.normalize_output else "none"}

    def as_mha_fields(self) -> dict[str, Any]:
        """As MHA the kernel is called through its ``gqa`` entry (``mqa`` takes one kv
        head)."""
        return {"entry": "gqa"}


def _splits_into(kv_len: int, k_splits: int) -> bool:
    split, rem = divmod(kv_len, k_splits)
    return not rem and is_pow2(split) and split >= 16


@st.composite
def _config(draw: st.DrawFn, problem: AttentionProblem) -> dict[str, Any]:
    return {"entry": draw(st.sampled_from(ENTRIES)) if problem.kv_heads == 1 else "gqa",
            "normalize_output": draw(st.booleans()),
            "sm_scale_arg": problem.scale is None and draw(st.booleans())}


def config(problem: AttentionProblem) -> st.SearchStrategy[dict[str, Any]]:
    """The entry point (``mqa`` only on one kv head), the output normalization and how the
    default scale is passed (a ``Config`` strategy)."""
    return _config(problem)


@st.composite
def _blocks(draw: st.DrawFn, problem: AttentionProblem) -> dict[str, Any]:
    splits = [k for k in (1, 2, 4, 8, 16) if _splits_into(problem.kv_len, k)]
    return {"block_h": draw(st.sampled_from((16, 32))),
            "block_k": draw(st.sampled_from((32, 16, 64, 256))),
            "k_splits": draw(st.sampled_from(splits)),
            "num_warps": draw(st.sampled_from((None, None, 4, 8))),
            "num_stages": draw(st.sampled_from((2, 1, 3)))}


def blocks(problem: AttentionProblem) -> st.SearchStrategy[dict[str, Any]]:
    """The kernel's tiling (a ``Config`` strategy): head blocks, key blocks below, at and
    above the split length (the kernel clamps), 1-16 kv splits (16: the kernel's default)
    and the launch settings.
    Shrinks towards one split of block 32."""
    return _blocks(problem)


def config_toggles(case: DecodeCase) -> list[Toggle]:
    """The unnormalized output normalized (values change)."""
    return toggles(case, ("unnormalized", not case.normalize_output,
                          {"normalize_output": True}, "values"))


def config_events(case: DecodeCase) -> list[str]:
    """The kernel paths the case's configuration and key bounds reach."""
    ev = [f"entry-{case.entry}"]
    if case.scale is None:
        ev.append("scale-arg" if case.sm_scale_arg else "scale-default")
    block = min(case.block_k, case.split_len)
    group = case.q_heads // case.kv_heads
    ev += [label for label, on in (
        ("head-splits", group > case.block_h), ("head-padding", group % case.block_h),
        ("multi-split", case.k_splits > 1), ("multi-k-block", case.split_len > block),
        # round 8: wrong from 8 splits, past 2 rows, past 512 keys, where draws stopped
        ("splits>=8", case.k_splits >= 8), ("rows>2", case.batch > 2),
        ("block-k-clamped", case.block_k > case.split_len),
        ("unnormalized", not case.normalize_output)) if on]
    vis = case.visible()[:, 0, 0]
    if vis[:, 512:].any():  # a key past the 512th seen (round 8 ignored those)
        ev.append("keys>512")
    counts = vis.sum(axis=1)
    if (counts == 1).any():
        ev.append("one-key-row")
    if ((counts > 0) & (counts < case.kv_len)).any():
        ev.append("partial-row")
    per_split = vis.reshape(case.batch, case.k_splits, case.split_len).any(axis=2)
    if (per_split.any(axis=1) & ~per_split.all(axis=1)).any():
        ev.append("split-skipped")
    per_block = vis.reshape(case.batch, -1, block).any(axis=2)
    if case.split_len > block and (~per_block).any() and (counts > 0).any():
        ev.append("block-fully-masked")
    return ev
