"""The gpu-mha family's case: the attention problem (:class:`~kernel_harness.ops.attention.
problem.AttentionProblem`) as the Pallas GPU (Triton) ``mha`` takes it, and its blocks.

q, k, v are ``[batch, len, heads, head_dim]`` (no GQA); ONE int32 ``[batch, len]``
segment-id array serves queries and keys; causal (top-left) needs ``q_len <= kv_len``;
lse is the kernel's residual in log base 2. An explicit scale is 1.0 (q pre-scaled in the
data; the kernel skips its multiply), else ``sm_scale = 1/sqrt(head_dim)``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from kernel_harness.core.case import DTYPES
from kernel_harness.families.gpu_common import TILE_SIZES, is_pow2
from kernel_harness.ops.attention.features import Features
from kernel_harness.ops.attention.problem import AttentionProblem

BLOCK_FIELDS: tuple[str, ...] = (
    "block_q", "block_k", "block_q_dkv", "block_kv_dkv", "block_q_dq", "block_kv_dq",
)
#: A requested block this large is clamped by the kernel to the sequence length.
OVERSIZE_BLOCK = 256
_Q_BLOCKS = ("block_q", "block_q_dkv", "block_q_dq")


@dataclasses.dataclass(frozen=True, kw_only=True)
class MhaCase(AttentionProblem):
    """One call of ``mha`` forward and backward: the attention problem, the requested
    ``BlockSizes`` (the kernel clamps each to its sequence length) and the Triton launch
    settings ``num_warps``/``num_stages`` (accepted but unused in interpret mode)."""

    block_q: int = 32
    block_k: int = 32
    block_q_dkv: int = 32
    block_kv_dkv: int = 32
    block_q_dq: int = 32
    block_kv_dq: int = 32
    num_warps: int | None = None
    num_stages: int = 2

    FEATURES = Features(
        layout="bqhd",
        names={"q": "q", "k": "k", "v": "v", "do": "do", "segment_ids_q": "segment_ids",
               "segment_ids_kv": "segment_ids"},
        optional=frozenset({"causal", "segments", "scale", "q-len-ne-kv-len"}),
        shared_segments=True,
        causal_q_le_kv=True,
        lse="base2",
        # Below float32 the kernel's designed rounding (P and dS cast to the input dtype)
        # follows the summed terms; float32 keeps |dq|, |dk| so that its bound still sees
        # a float32 kernel rounding to bfloat16 inside.
        magnitudes=("dq", "dk"),
        magnitude_dtypes=("bfloat16", "float16"),
        dtypes=DTYPES,
        max_batch=2,
        max_batch_heads=4,  # bounds interpret time
        lengths=(64, 32, 128, 96),  # 96: not a power of two (the padded last block)
        q_only_lengths=(),
        # 48: padded to a power of two inside the kernel; 16: the smallest dot operand (round 6
        # of the adversarial set passed a kernel wrong only there)
        head_dims=(32, 64, 48, 16),
        # Any sm_scale the caller passes (round 6 passed a kernel that ignores one other than
        # 1/sqrt(head_dim) and 1.0, the only two drawn until then).
        scales=(0.5, 2.0),
        scale_span=(1 / 16, 16.0),  # and anywhere, one explicit scale in four
        unit_scale=True,  # sm_scale=1.0 with q pre-scaled: the kernel skips its multiply
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.head_dim < 16:
            raise ValueError(f"head_dim must be >= 16 (a Triton dot operand), got {self.head_dim}")
        for name in BLOCK_FIELDS:
            eff, length = self.effective_block(name), self._block_length(name)
            if not is_pow2(eff) or eff < 16 or length % eff:
                raise ValueError(
                    f"{name}={getattr(self, name)} clamps to {eff}, which must be a power of two "
                    f">= 16 dividing its sequence length {length} (the forward raises otherwise; "
                    "the backward does not check and silently computes wrong gradients)"
                )
        n_dq = self.q_len // self.effective_block("block_q_dq")
        n_dkv = self.kv_len // self.effective_block("block_kv_dkv")
        if n_dq != n_dkv:
            raise ValueError(
                f"the fused backward needs as many q blocks (block_q_dq: {n_dq}) as kv blocks "
                f"(block_kv_dkv: {n_dkv})"
            )

    @classmethod
    def upgraded(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Cases stored before gpu-mha was on the attention problem: ``causal`` is
        ``is_causal``, ``segment_runs`` the one layout of queries and keys, ``scale_mode``
        ``arg`` the default scale and ``prescaled-q`` the explicit scale 1.0, and
        ``kv_heads`` the query heads (no GQA)."""
        out = dict(data)
        if "causal" in out:
            out["is_causal"] = out.pop("causal")
        if "segment_runs" in out:
            out["q_segments"] = out["kv_segments"] = out.pop("segment_runs")
        if "scale_mode" in out:
            out["scale"] = 1.0 if out.pop("scale_mode") == "prescaled-q" else None
        if "q_heads" in out and "kv_heads" not in out:
            out["kv_heads"] = out["q_heads"]
        return out

    def _block_length(self, name: str) -> int:
        return self.q_len if name in _Q_BLOCKS else self.kv_len

    def effective_block(self, name: str) -> int:
        """The block size the kernel uses: the request clamped to the sequence length."""
        return min(getattr(self, name), self._block_length(name))


def _blocks_of(length: int, smallest: int = 16) -> list[int]:
    """Every block of at least ``smallest`` the kernel accepts along ``length`` (largest
    first), and an oversize one where the length it clamps to is itself a valid block (a
    power of two >= 16: 96 is not)."""
    tiles = [b for b in reversed(TILE_SIZES)
             if smallest <= b <= length and length % b == 0]
    return tiles + ([OVERSIZE_BLOCK] if is_pow2(length) and 16 <= length <= OVERSIZE_BLOCK
                    else [])


def _backward_counts(q_len: int, kv_len: int) -> list[int]:
    """Block counts both lengths split into, each block a power of two >= 16 (the fused
    backward takes as many q blocks as kv blocks)."""
    return [n for n in range(1, min(q_len, kv_len) // 16 + 1)
            if q_len % n == 0 and kv_len % n == 0 and is_pow2(q_len // n)
            and is_pow2(kv_len // n) and q_len // n >= 16 and kv_len // n >= 16]


@st.composite
def _blocks(draw: st.DrawFn, problem: AttentionProblem, smallest: int = 16) -> dict[str, Any]:
    q_len, kv_len = problem.q_len, problem.kv_len
    blocks_of = functools.partial(_blocks_of, smallest=smallest)
    counts = [n for n in _backward_counts(q_len, kv_len) if q_len // n >= smallest]
    assume(counts)  # e.g. 96 with 64: no block count gives both powers of two
    n_bwd = draw(st.sampled_from(counts))
    oversize = n_bwd == 1 and draw(st.booleans())
    return {
        "block_q": draw(st.sampled_from(blocks_of(q_len))),
        "block_k": draw(st.sampled_from(blocks_of(kv_len))),
        "block_q_dkv": draw(st.sampled_from(blocks_of(q_len))),
        "block_kv_dkv": OVERSIZE_BLOCK if oversize else kv_len // n_bwd,
        "block_q_dq": OVERSIZE_BLOCK if oversize else q_len // n_bwd,
        "block_kv_dq": draw(st.sampled_from(blocks_of(kv_len))),
        "num_warps": draw(st.sampled_from((None, None, 4, 8))),
        "num_stages": draw(st.sampled_from((2, 1, 3))),
    }


def blocks(problem: AttentionProblem) -> st.SearchStrategy[dict[str, Any]]:
    """The requested blocks of an ``mha`` call on ``problem`` (a ``Config`` strategy):
    forward and backward drawn independently, sometimes oversized so the kernel clamps
    them, the fused backward's q and kv blocks in equal numbers; and the launch settings.
    Shrinks towards one block each."""
    return _blocks(problem)


#: The smallest block of the large sizes (the ``large-sizes`` property): thousands of
#: tokens in blocks of 16 or 32 cost interpretation time per block, not coverage (the
#: small sizes draw them).
LARGE_SMALLEST_BLOCK = 64


def large_blocks(problem: AttentionProblem) -> st.SearchStrategy[dict[str, Any]]:
    """:func:`blocks` at large sizes: blocks of at least :data:`LARGE_SMALLEST_BLOCK`."""
    return _blocks(problem, LARGE_SMALLEST_BLOCK)


def block_events(case: MhaCase) -> list[str]:
    """The kernel paths the case's blocks and sizes reach."""
    ev = [] if case.is_causal else ["non-causal"]
    if case.q_len // case.effective_block("block_q") > 1:
        ev.append("multi-q-block")
    if case.kv_len // case.effective_block("block_k") > 1:
        ev.append("multi-kv-block")
    if case.q_len // case.effective_block("block_q_dq") > 1:
        ev.append("multi-bwd-block")
    if (case.block_q_dkv, case.block_kv_dq) != (case.block_q, case.block_k):
        ev.append("bwd-blocks-differ")
    if any(getattr(case, n) > case.effective_block(n) for n in ("block_q", "block_k",
                                                                "block_q_dq", "block_q_dkv")):
        ev.append("block-clamped")
    if not is_pow2(case.q_len) or not is_pow2(case.kv_len):
        ev.append("non-pow2-length")
    if not is_pow2(case.head_dim):
        ev.append("head-dim-padded")
    return ev
