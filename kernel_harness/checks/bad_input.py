"""Bad input: invalid configurations must raise a clear error, never compute garbage.

Per family, a list of :class:`BadInput` entries calls the kernel's own entry
point (not the harness's case validation, which would reject them first) on
the ``interpret`` backend with one thing wrong: a block size not dividing a
length, segment ids or a mask of the wrong shape, a bad window... Each run is
classified:

- ``clear``: raised, and the message matches the entry's ``expect`` pattern;
- ``unclear``: raised, but with a message that does not say what is wrong
  (e.g. a shape error deep inside the kernel);
- ``silent``: returned a result: the configuration silently "works".

Entries declare what the kernel is known to do (``status``, with the
``finding`` in words when it is not ``clear``); the tests and ``kernel-harness
bad-input`` report every entry and fail on any change, so a kernel that
starts (or stops) accepting bad input is noticed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

STATUSES: tuple[str, ...] = ("clear", "unclear", "silent")


@dataclasses.dataclass(frozen=True)
class BadInput:
    """One invalid configuration of one family's kernel.

    Attributes:
      name: what is wrong, in a few words.
      call: runs the kernel on that configuration (interpret mode, small shapes).
      expect: regular expression a clear error message must match.
      status: what the kernel is known to do: ``clear``, ``unclear`` or ``silent``.
      finding: for ``unclear``/``silent``, what happens instead (a finding about the
        kernel, reported every run).
    """

    name: str
    call: Callable[[], Any]
    expect: str
    status: str = "clear"
    finding: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if self.status != "clear" and not self.finding:
            raise ValueError(f"{self.name}: a {self.status} entry needs its finding")


@dataclasses.dataclass(frozen=True)
class BadInputResult:
    """What running one :class:`BadInput` did."""

    family: str
    entry: BadInput
    observed: str
    message: str

    @property
    def as_declared(self) -> bool:
        return self.observed == self.entry.status

    def describe(self) -> str:
        text = f"{self.family:<8} {self.entry.name:<44} {self.observed.upper():<8}"
        if self.observed != "silent":
            text += f" {self.message[:140]}"
        if self.entry.finding:
            text += f"\n           known finding: {self.entry.finding}"
        if not self.as_declared:
            text += f"\n           CHANGED: declared {self.entry.status}, observed {self.observed}"
        return text


def run_bad_input(family: str, entry: BadInput) -> BadInputResult:
    """Runs one entry and classifies what happened."""
    try:
        jax.block_until_ready(entry.call())
    except Exception as e:  # noqa: BLE001 - the exception is the result
        message = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        observed = "clear" if re.search(entry.expect, message) else "unclear"
        return BadInputResult(family=family, entry=entry, observed=observed, message=message)
    return BadInputResult(family=family, entry=entry, observed="silent", message="")


# --- splash ---------------------------------------------------------------------------------------


def _splash() -> list[BadInput]:
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sk
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as ml

    def x(heads: int, n: int, d: int = 128) -> jax.Array:
        return jnp.ones((heads, n, d), jnp.float32)

    def blocks(**kw: int) -> Any:
        base = dict(block_q=128, block_kv=128, block_kv_compute=128, block_q_dkv=128,
                    block_kv_dkv=128, block_kv_dkv_compute=128, block_q_dq=128, block_kv_dq=128)
        return sk.BlockSizes(**{**base, **kw})

    def kernel(n: int, heads: int = 1, **kw: Any) -> Any:
        mask = ml.MultiHeadMask([ml.CausalMask((n, n))] * heads)
        return sk.make_splash_mha(mask, block_sizes=kw.pop("block_sizes", blocks()),
                                  head_shards=1, q_seq_shards=1, interpret=True, **kw)

    ids = lambda n: jnp.zeros((n,), jnp.int32)  # noqa: E731
    return [
        BadInput("block_q does not divide q_len",
                 lambda: kernel(512, block_sizes=blocks(block_q=384))(x(1, 512), x(1, 512),
                                                                       x(1, 512)),
                 r"block_size=384 should divide q_seq_len=512"),
        BadInput("block_kv_compute does not divide block_kv",
                 lambda: kernel(768, block_sizes=blocks(block_kv=384, block_kv_compute=256))(
                     x(1, 768), x(1, 768), x(1, 768)),
                 r"multiple of bkv_compute"),
        BadInput("q segment ids of the wrong length",
                 lambda: kernel(256)(x(1, 256), x(1, 256), x(1, 256),
                                     segment_ids=sk.SegmentIds(q=ids(128), kv=ids(256))),
                 r"shape for q segment_ids"),
        BadInput("kv segment ids of the wrong length",
                 lambda: kernel(256)(x(1, 256), x(1, 256), x(1, 256),
                                     segment_ids=sk.SegmentIds(q=ids(256), kv=ids(384))),
                 r"shape for kv segment_ids"),
        BadInput("q heads not a multiple of kv heads",
                 lambda: kernel(256, heads=3)(x(3, 256), x(2, 256), x(2, 256)),
                 r"multiple of the number of 'query' heads"),
        BadInput("k head_dim differs from q's",
                 lambda: kernel(256)(x(1, 256), x(1, 256, 64), x(1, 256)),
                 r"head dimension"),
        BadInput("mask shape differs from (q_len, kv_len)",
                 lambda: kernel(256)(x(1, 512), x(1, 512), x(1, 512)),
                 r"mask.*shape|shape.*mask", status="unclear",
                 finding="a TypeError from broadcast_in_dim inside the kernel wrapper, "
                 "not a message naming the mask"),
        BadInput("mask has more heads than q",
                 lambda: kernel(256, heads=2)(x(1, 256), x(1, 256), x(1, 256)),
                 r"heads", status="silent",
                 finding="a 2-head MultiHeadMask with 1-head q/k/v runs, using the first "
                 "head's mask"),
        BadInput("local window with a negative side",
                 lambda: ml.LocalMask((256, 256), window_size=(-5, 0), offset=0)[0:256, 0:256],
                 r"window", status="silent",
                 finding="LocalMask accepts window_size=(-5, 0) (a window excluding the "
                 "diagonal) without complaint"),
    ]


# --- flash ----------------------------------------------------------------------------------------


def _flash() -> list[BadInput]:
    from jax.experimental.pallas.ops.tpu import flash_attention as fa

    from kernel_harness.core import compat

    params = compat.tpu_interpret_params(detect_races=False, uninitialized_memory="zero",
                                         num_cores_or_threads=1)

    def x(b: int, n: int, d: int = 128) -> jax.Array:
        return jnp.ones((b, 1, n, d), jnp.float32)

    def blocks(**kw: int) -> Any:
        base = dict(block_b=1, block_q=128, block_k_major=128, block_k=128,
                    block_q_major_dkv=128, block_k_major_dkv=128, block_k_dkv=128,
                    block_q_dkv=128, block_k_major_dq=128, block_k_dq=128, block_q_dq=128)
        return fa.BlockSizes(**{**base, **kw})

    def run(*args: Any, **kw: Any) -> Any:
        kw.setdefault("block_sizes", blocks())
        with compat.forced_tpu_interpret_mode(params):
            return jax.block_until_ready(fa.flash_attention(*args, **kw))

    ids = lambda b, n: jnp.zeros((b, n), jnp.int32)  # noqa: E731
    return [
        BadInput("block_k_major does not divide kv_len",
                 lambda: run(x(1, 512), x(1, 512), x(1, 512),
                             block_sizes=blocks(block_k_major=384)),
                 r"divisible by block_k_major"),
        BadInput("block_k does not divide block_k_major",
                 lambda: run(x(1, 768), x(1, 768), x(1, 768),
                             block_sizes=blocks(block_k_major=384, block_k=256)),
                 r"block_k=256 should divide block_k_major=384"),
        BadInput("q segment ids of the wrong shape",
                 lambda: run(x(1, 256), x(1, 256), x(1, 256),
                             segment_ids=fa.SegmentIds(q=ids(1, 128), kv=ids(1, 256))),
                 r"Q segment ids shape mismatch"),
        BadInput("kv segment ids of the wrong shape",
                 lambda: run(x(1, 256), x(1, 256), x(1, 256),
                             segment_ids=fa.SegmentIds(q=ids(1, 256), kv=ids(1, 384))),
                 r"KV segment ids shape mismatch"),
        BadInput("bias of the wrong shape",
                 lambda: run(x(1, 256), x(1, 256), x(1, 256), ab=jnp.ones((1, 1, 256, 128))),
                 r"bias shape mismatch"),
        BadInput("k head_dim differs from q's",
                 lambda: run(x(1, 256), x(1, 256, 64), x(1, 256)),
                 r"dimension mismatch"),
        BadInput("k and v lengths differ",
                 lambda: run(x(1, 256), x(1, 256), x(1, 384)),
                 r"sequence length mismatch"),
    ]


# --- hstu -----------------------------------------------------------------------------------------


def _hstu() -> list[BadInput]:
    from kernel_harness.kernels.hstu.api import hstu_attention

    def call(n: int = 256, mask: Any = "causal", **kw: Any) -> Any:
        x = jnp.ones((1, n, 1, 64), jnp.float32)
        return hstu_attention(mask, x, x, x, interpret=True, **kw)

    ids = lambda n: jnp.zeros((1, n), jnp.int32)  # noqa: E731
    return [
        BadInput("block_q not a multiple of 128", lambda: call(block_q=100), r"128-lane rule"),
        BadInput("block_q does not divide q_len", lambda: call(512, block_q=384),
                 r"block_q=384 does not divide q_len=512"),
        BadInput("compute block does not divide its block",
                 lambda: call(768, block_q=384, block_kv=384, block_kv_compute=256),
                 r"block_kv_compute=256"),
        BadInput("q segment ids of the wrong shape",
                 lambda: call(q_segment_ids=ids(128), kv_segment_ids=ids(256)),
                 r"q_segment_ids must have shape"),
        BadInput("only q segment ids", lambda: call(q_segment_ids=ids(256)),
                 r"both q_segment_ids and kv_segment_ids"),
        BadInput("numpy mask of the wrong shape",
                 lambda: call(mask=np.ones((128, 256), bool)), r"mask shape .* does not match"),
        BadInput("negative window", lambda: call(sliding_window_size=-1),
                 r"sliding_window_size must be >= 0"),
        BadInput("unknown mask type", lambda: call(mask="diagonal"), r"mask_type must be"),
    ]


#: Family name -> builder of its bad-input list (built lazily: it imports the kernel).
BAD_INPUTS: dict[str, Callable[[], list[BadInput]]] = {
    "splash": _splash,
    "flash": _flash,
    "hstu": _hstu,
}


def check_family(family: str) -> list[BadInputResult]:
    """Runs every bad-input entry of ``family``."""
    return [run_bad_input(family, entry) for entry in BAD_INPUTS[family]()]
