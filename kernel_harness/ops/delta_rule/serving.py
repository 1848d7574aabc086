"""The delta-rule op served: a ragged batch of sequences, per-sequence states in slot pools,
a short causal conv1d before the recurrence and the gates computed from raw inputs.

A serving kernel (vLLM's Gated DeltaNet layer) takes one packed token stream of several
sequences, each resuming from (or starting without) a cached state, and writes the states
back. One call, per sequence s with tokens [start_s, end_s) of the stream:

- history_s = seq_len_s - query_len_s tokens came before this call: history_s > 0 resumes
  from slot ``read_slots[s]`` of both pools (the conv state, the last kernel_size - 1 raw
  inputs, and the recurrent state); history_s = 0 starts from zeros (the slot may hold
  anything).
- pre-stage (per channel c of the packed qkv row, ``dim`` channels): x' = silu(sum_j
  w[c, j] x[t - (K - 1) + j, c] + bias[c]), the inputs before the sequence's first token
  read from its conv state; then q, k, v are x' split [n_kq d_k | n_kq d_k | n_v d_v].
- gates per token and value head h: g = -exp(a_log[h]) softplus(a[t, h] + dt_bias[h]),
  beta = sigmoid(b[t, h]); with a per-channel gate (KDA, ``gate="channel"``) a and dt_bias
  have one entry per value head and key channel (head-major, [n_v d_k]) and so has g, the
  state decaying row by row.
- the op's recurrence (:mod:`.reference`) in its Gated DeltaNet form: q and k
  L2-normalised (q times 1/sqrt(d_k)), value head h reads key head h // (n_v / n_kq), the
  erase and write gates both beta (per head), the log decay g per head.
- outputs: ``out`` [tokens, n_v d_v] (rows past the last sequence zero), the conv pool
  with slot ``write_slots[s]`` holding the sequence's last K - 1 raw inputs (from its conv
  state where it has fewer tokens), the recurrent pool with that slot holding its final
  state; every other slot unchanged, bit for bit.

Cases (:class:`ServingCase`), the reference (:func:`serving_reference`), the strategy
(:func:`serving_cases`) and its events (:func:`serving_events`) live here; a kernel's
limits (head sizes, token rows, slot count) are the strategy's arguments. Its relations
(state continuity): :mod:`.serving_relations`.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import Arrays, Case, cast, check_sizes
from kernel_harness.ops.delta_rule.reference import recurrence

#: How the decay gate is drawn: ``ordinary``, a_log ~ N(0, 0.5) (g near -0.7 per token);
#: ``weak``, a_log in [-5, -3] (g near -0.03: the state carries ~30 tokens back, so a
#: stale or misplaced initial state shows in every output).
SERVING_DECAYS: tuple[str, ...] = ("ordinary", "weak")
#: The decay gate's layout: one per value head (Gated DeltaNet) or per value head and key
#: channel (KDA, Kimi Delta Attention).
GATES: tuple[str, ...] = ("head", "channel")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServingCase(Case):
    """One serving call of the conv1d + gated delta rule.

    Attributes:
      tokens: rows of the packed stream (real tokens first, then padding rows).
      max_seqs: entries of the per-sequence arrays (those past the real sequences are
        padding: zero-length, slot 0).
      slots: slots of each state pool (slot 0 is the null slot: no sequence uses it).
      key_heads, value_heads, key_dim, value_dim: n_kq, n_v, d_k, d_v.
      kernel_size: the conv taps K (the conv state keeps K - 1 inputs).
      conv_bias: whether the conv has a bias.
      chunk_size: the kernel's chunk (tokens per chunked step), for the events.
      lengths: tokens of each real sequence in this call; ``histories``: tokens before
        it (0: no initial state).
      num_decode: the first ``num_decode`` sequences are decodes (one token, history > 0).
      write_slots, read_slots: per sequence, where its states are written and read.
      decay: :data:`SERVING_DECAYS`.
      gate: :data:`GATES` (the layout of a and dt_bias, and of the log decay).
    """

    tokens: int
    max_seqs: int
    slots: int
    key_heads: int = 1
    value_heads: int = 1
    key_dim: int = 128
    value_dim: int = 128
    kernel_size: int = 4
    conv_bias: bool = True
    chunk_size: int = 64
    lengths: tuple[int, ...] = (1,)
    histories: tuple[int, ...] = (0,)
    num_decode: int = 0
    write_slots: tuple[int, ...] = (1,)
    read_slots: tuple[int, ...] = (1,)
    decay: str = "ordinary"
    gate: str = "head"

    #: Data only (arrays of the call): which sequences, how long, where their states are.
    DYNAMIC_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"seed", "lengths", "histories", "num_decode", "write_slots", "read_slots",
         "decay"})

    def __post_init__(self) -> None:
        super().__post_init__()
        check_sizes(self, "tokens", "max_seqs", "slots", "key_heads", "value_heads",
                    "key_dim", "value_dim", "chunk_size")
        n = len(self.lengths)
        if self.value_heads % self.key_heads:
            raise ValueError(f"value_heads={self.value_heads} must be a multiple of "
                             f"key_heads={self.key_heads}")
        if self.kernel_size < 2:
            raise ValueError(f"kernel_size must be >= 2, got {self.kernel_size}")
        if not 1 <= n <= self.max_seqs or min(self.lengths) < 1:
            raise ValueError(f"lengths {self.lengths}: 1..max_seqs={self.max_seqs} "
                             "sequences of >= 1 token")
        if sum(self.lengths) > self.tokens:
            raise ValueError(f"lengths sum to {sum(self.lengths)} > tokens={self.tokens}")
        for name in ("histories", "write_slots", "read_slots"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} needs one entry per sequence ({n})")
        if min(self.histories) < 0:
            raise ValueError(f"histories must be >= 0, got {self.histories}")
        slots = (*self.write_slots, *self.read_slots)
        if not all(1 <= s < self.slots for s in slots):
            raise ValueError(f"slots must be in 1..{self.slots - 1} (0 is the null slot)")
        if len(set(self.write_slots)) != n:
            raise ValueError(f"write_slots {self.write_slots} must be distinct")
        for s, r in enumerate(self.read_slots):
            if r in self.write_slots and self.write_slots.index(r) != s:
                raise ValueError(f"sequence {s} reads slot {r}, which another writes")
        if not 0 <= self.num_decode <= n or any(
                self.lengths[s] != 1 or self.histories[s] < 1 for s in range(self.num_decode)):
            raise ValueError("the first num_decode sequences must be one token with history")
        if self.gate not in GATES:
            raise ValueError(f"gate must be one of {GATES}, got {self.gate!r}")
        if self.decay not in SERVING_DECAYS:
            raise ValueError(f"decay must be one of {SERVING_DECAYS}, got {self.decay!r}")

    @property
    def dim(self) -> int:
        """Channels of a qkv row: 2 n_kq d_k + n_v d_v."""
        return 2 * self.key_heads * self.key_dim + self.value_heads * self.value_dim

    def starts(self) -> np.ndarray:
        """int32 [len(lengths) + 1]: the first row of each sequence, then the end."""
        return np.concatenate([[0], np.cumsum(self.lengths)]).astype(np.int32)

    def shape_summary(self) -> str:
        """``seqs=[1+9, 70+0] rows=192 heads=1/2 d=128/128 K=4 slots=9 weak``."""
        seqs = ", ".join(f"{n}+{h}" for n, h in zip(self.lengths, self.histories,
                                                       strict=True))
        moved = [s for s, (w, r) in enumerate(zip(self.write_slots, self.read_slots,
                                                 strict=True)) if w != r]
        return (f"seqs=[{seqs}] decode={self.num_decode} rows={self.tokens} heads="
                f"{self.key_heads}/{self.value_heads} d={self.key_dim}/{self.value_dim} "
                f"K={self.kernel_size}{'+bias' if self.conv_bias else ''} slots="
                f"{self.slots}{f' moved={moved}' if moved else ''} {self.decay}"
                f"{' per-channel' if self.gate == 'channel' else ''}")

    def materialize(self) -> Arrays:
        """The call's arrays: qkv (the case's dtype), b, a, both pools, the weights
        (float32) and the int32 metadata (``query_start_loc``, ``state_indices``,
        ``distribution``, ``seq_lens``, ``read_state_indices``) padded to ``max_seqs``."""
        rng = self.rng()
        dim = self.dim
        # The conv weights sum ~1 over the taps, so x' stays O(1).
        weight = rng.standard_normal((dim, 1, self.kernel_size)) / np.sqrt(self.kernel_size)
        a_log = (rng.standard_normal(self.value_heads) * 0.5 if self.decay == "ordinary"
                 else rng.uniform(-5.0, -3.0, self.value_heads))
        gates = self.value_heads * (self.key_dim if self.gate == "channel" else 1)
        arrays = {
            "qkv": rng.standard_normal((self.tokens, dim)),
            "b": rng.standard_normal((self.tokens, self.value_heads)),
            "a": rng.standard_normal((self.tokens, gates)),
            "conv_state": rng.standard_normal((self.slots, self.kernel_size - 1, dim)),
            "recurrent_state": rng.standard_normal(
                (self.slots, self.value_heads, self.key_dim, self.value_dim)) * 0.1,
            "conv_weight": weight, "a_log": a_log,
            "dt_bias": rng.standard_normal(gates) * 0.5,
        }
        if self.conv_bias:
            arrays["conv_bias"] = rng.standard_normal(dim) * 0.1
        out = {k: np.asarray(v, np.float32) for k, v in arrays.items()}
        out["qkv"] = cast(arrays["qkv"], self.dtype)
        if self.gate == "channel":  # a per-channel gate comes in qkv's dtype (KDA's g)
            out["a"] = cast(arrays["a"], self.dtype)
        # The conv state holds raw inputs (what a previous call wrote): qkv's dtype's values.
        out["conv_state"] = cast(arrays["conv_state"], self.dtype).astype(np.float32)
        out.update(self.metadata())
        return out

    def metadata(self) -> Arrays:
        """The int32 per-sequence arrays of the call, padded to ``max_seqs``:
        ``query_start_loc``, ``state_indices``, ``distribution``, ``seq_lens``,
        ``read_state_indices``."""
        n, pad = len(self.lengths), self.max_seqs - len(self.lengths)
        starts = self.starts()
        return dict(
            query_start_loc=np.concatenate([starts, np.full(pad, starts[-1])]).astype(np.int32),
            state_indices=np.array([*self.write_slots, *[0] * pad], np.int32),
            distribution=np.array([self.num_decode, n, n], np.int32),
            seq_lens=np.array([h + q for h, q in zip(self.histories, self.lengths,
                                                     strict=True)] + [0] * pad, np.int32),
            read_state_indices=np.array([*self.read_slots, *[0] * pad], np.int32))


def silu(x: np.ndarray) -> np.ndarray:
    """x sigmoid(x), float64."""
    return x / (1.0 + np.exp(-x))


def softplus(x: np.ndarray) -> np.ndarray:
    """log(1 + e^x), float64, overflow-free."""
    return np.logaddexp(0.0, x)


def pre_stage(case: ServingCase, inputs: Arrays) -> tuple[list[np.ndarray], np.ndarray]:
    """Per sequence, its conv outputs after silu [length, dim] (float64), and the conv
    pool after the call (float32): the conv in float64 from the rounded inputs."""
    x = np.asarray(inputs["qkv"], np.float64)
    w = np.asarray(inputs["conv_weight"], np.float64)[:, 0, :]  # [dim, K]
    bias = np.asarray(inputs.get("conv_bias", np.zeros(case.dim)), np.float64)
    pool = np.array(inputs["conv_state"], np.float32)
    taps, acts = case.kernel_size, []
    starts = case.starts()
    for s, length in enumerate(case.lengths):
        prev = (np.asarray(inputs["conv_state"][case.read_slots[s]], np.float64)
                if case.histories[s] else np.zeros((taps - 1, case.dim)))
        ext = np.concatenate([prev, x[starts[s]:starts[s] + length]])
        conv = sum(w[:, j] * ext[j:j + length] for j in range(taps)) + bias
        acts.append(silu(conv))
        pool[case.write_slots[s]] = ext[-(taps - 1):]
    return acts, pool


def serving_reference(case: ServingCase, inputs: Arrays) -> Arrays:
    """``out``, ``conv_state`` and ``recurrent_state`` of the call (float32 numpy): the
    pre-stage and gates in float64, then the op's token-serial recurrence (float32,
    HIGHEST) over the sequences as rows of one batch, each row padded past its end with
    tokens that change nothing (zero q, k, v, beta; g = 0)."""
    acts, conv_pool = pre_stage(case, inputs)
    n, longest = len(case.lengths), max(case.lengths)
    hk, hv, dk, dv = case.key_heads, case.value_heads, case.key_dim, case.value_dim
    group = hv // hk
    q = np.zeros((n, longest, hv, dk))
    k = np.zeros((n, longest, hv, dk))
    v = np.zeros((n, longest, hv, dv))
    g = np.zeros((n, longest, hv, dk))
    beta = np.zeros((n, longest, hv, 1))
    h0 = np.zeros((n, hv, dk, dv), np.float32)
    a_log = np.asarray(inputs["a_log"], np.float64)
    dt_bias = np.asarray(inputs["dt_bias"], np.float64).reshape(hv, -1)  # [hv, 1 or dk]
    starts = case.starts()
    for s, (act, length) in enumerate(zip(acts, case.lengths, strict=True)):
        rows = slice(starts[s], starts[s] + length)
        # Value head h reads key head h // group: q and k repeated to the value heads.
        q[s, :length] = np.repeat(act[:, :hk * dk].reshape(length, hk, dk), group, axis=1)
        k[s, :length] = np.repeat(act[:, hk * dk:2 * hk * dk].reshape(length, hk, dk),
                                  group, axis=1)
        v[s, :length] = act[:, 2 * hk * dk:].reshape(length, hv, dv)
        a = np.asarray(inputs["a"][rows], np.float64).reshape(length, hv, -1)
        g[s, :length] = -np.exp(a_log)[:, None] * softplus(a + dt_bias)
        beta[s, :length, :, 0] = 1.0 / (1.0 + np.exp(-np.asarray(inputs["b"][rows],
                                                                 np.float64)))
        if case.histories[s]:
            h0[s] = inputs["recurrent_state"][case.read_slots[s]]
    as32 = [jnp.asarray(x, jnp.float32) for x in (
        q, k, v, g, np.broadcast_to(beta, k.shape),
        np.broadcast_to(beta, v.shape))]
    o, final = recurrence(*as32, jnp.asarray(h0), jnp.zeros((n, longest), bool),
                          qk_l2norm=True)
    o, final = np.asarray(o, np.float32), np.asarray(final, np.float32)
    out = np.zeros((case.tokens, hv * dv), np.float32)
    rec_pool = np.array(inputs["recurrent_state"], np.float32)
    for s, length in enumerate(case.lengths):
        out[starts[s]:starts[s] + length] = o[s, :length].reshape(length, hv * dv)
        rec_pool[case.write_slots[s]] = final[s]
    return {"out": out, "conv_state": conv_pool, "recurrent_state": rec_pool}


def untouched_slots(case: ServingCase) -> list[int]:
    """The slots no sequence writes (slot 0 among them)."""
    return [s for s in range(case.slots) if s not in case.write_slots]


def serving_events(case: ServingCase) -> list[str]:
    """What ``case`` reaches: ``decode-row`` beside ``prefill-row`` (no history) and
    ``continued-prefill`` (several tokens with history), ``multi-chunk-sequence`` (longer
    than a chunk) with ``partial-last-chunk``, ``shorter-than-conv-state`` (a sequence
    with history and fewer than K - 1 tokens: its new conv state mixes old and new),
    ``misaligned-start`` (a sequence starting off an 8-row boundary), ``read-slot-differs``,
    ``unused-slots``, ``padding-rows``, ``padding-seqs``, ``grouped-heads``, ``conv-bias``,
    the decay and the dtype."""
    ev = [case.dtype, f"decay:{case.decay}", f"gate:{case.gate}"]
    starts = case.starts()
    for s, (n, h) in enumerate(zip(case.lengths, case.histories, strict=True)):
        if s < case.num_decode:
            ev.append("decode-row")
        elif h == 0:
            ev.append("prefill-row")
        else:
            ev.append("continued-prefill")
        if n > case.chunk_size:
            ev.append("multi-chunk-sequence")
            if n % case.chunk_size:
                ev.append("partial-last-chunk")
        if h and n < case.kernel_size - 1:
            ev.append("shorter-than-conv-state")
        if s >= case.num_decode and starts[s] % 8:
            ev.append("misaligned-start")
        if case.read_slots[s] != case.write_slots[s]:
            ev.append("read-slot-differs")
    if "decode-row" in ev and ({"prefill-row", "continued-prefill"} & set(ev)):
        ev.append("decode-beside-prefill")
    if len(untouched_slots(case)) > 1:
        ev.append("unused-slots")
    if starts[-1] < case.tokens:
        ev.append("padding-rows")
    if len(case.lengths) < case.max_seqs:
        ev.append("padding-seqs")
    if case.value_heads > case.key_heads:
        ev.append("grouped-heads")
    if case.conv_bias:
        ev.append("conv-bias")
    return sorted(set(ev))


@st.composite
def serving_cases(draw: st.DrawFn, *, tokens: int = 192, max_seqs: int = 4, slots: int = 10,
                  heads: tuple[tuple[int, int], ...] = ((1, 1), (1, 2)),
                  dims: tuple[int, int] = (128, 128), kernel_sizes: tuple[int, ...] = (4,),
                  chunk_size: int = 64, dtypes: tuple[str, ...] = ("bfloat16",),
                  gate: str = "head") -> ServingCase:
    """Valid :class:`ServingCase` s: 0..2 decodes first, then 1.. prefill or continued
    sequences (one often longer than a chunk, some shorter than the conv state), within
    ``tokens`` rows and ``max_seqs`` sequences; slots drawn from 1..slots-1, some read
    from another slot than written. Shrinks towards one short fresh sequence."""
    n = draw(st.integers(1, max_seqs), label="sequences")
    num_decode = draw(st.integers(0, min(2, n - 1)), label="decodes")
    budget = tokens - num_decode
    lengths = [1] * num_decode
    histories = [draw(st.integers(1, 300), label="decode history")
                 for _ in range(num_decode)]
    for i in range(n - num_decode):
        left = budget - sum(lengths[num_decode:]) - (n - num_decode - i - 1)
        kind = draw(st.sampled_from(("short", "long", "any")), label="length kind")
        lo, hi = {"short": (1, min(3, left)), "long": (min(chunk_size + 1, left), left),
                  "any": (1, left)}[kind]
        lengths.append(draw(st.integers(lo, hi), label="length"))
        histories.append(draw(st.sampled_from((0, 0, 1, 2, 5, 100)), label="history"))
    written = draw(st.permutations(range(1, slots)), label="slot order")[:n]
    reads = []
    free = [s for s in range(1, slots) if s not in written]
    for s in range(n):
        moved = free and draw(st.booleans(), label="read from another slot")
        reads.append(free.pop(0) if moved else written[s])
    kh, vh = draw(st.sampled_from(heads), label="(key_heads, value_heads)")
    return ServingCase(
        dtype=draw(st.sampled_from(dtypes), label="dtype"),
        seed=draw(st.integers(0, 2**31 - 1), label="seed"), tokens=tokens,
        max_seqs=max_seqs, slots=slots, key_heads=kh, value_heads=vh, key_dim=dims[0],
        value_dim=dims[1], kernel_size=draw(st.sampled_from(kernel_sizes), label="K"),
        conv_bias=draw(st.booleans(), label="conv_bias"), chunk_size=chunk_size,
        lengths=tuple(lengths), histories=tuple(histories), num_decode=num_decode,
        write_slots=tuple(written), read_slots=tuple(reads),
        decay=draw(st.sampled_from(SERVING_DECAYS), label="decay"), gate=gate)
