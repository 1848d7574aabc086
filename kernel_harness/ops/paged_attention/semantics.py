"""What the ragged paged attention op means, written once: the contract text every ragged
kernel's family starts from (tpu-ragged-paged; tpu-inference's rpa v3, its head-dim-64
variant and MLA v2). A family's contract adds only its kernel's own facts after it: the
layout of its cache and heads, its blocks, what its kernel leaves and its findings.

- :data:`RAGGED`: the op itself (sequences over a paged cache, the mask, the logits,
  padding), for every ragged kernel;
- :data:`PASSES`: a call in passes that writes the new tokens into the cache first
  (:mod:`.passes`, :mod:`.kv_update`);
- :data:`SEMANTICS`: both, the contract of a kernel of the passes;
- :data:`QUANTIZED`: the op's quantized cache, for the kernels that take one.

The code that holds the op to these lines: :mod:`.sequences` (the batch, its padding and
page walk), :mod:`.ragged` (the reference), :mod:`.passes`, :mod:`.kv_update` and
:mod:`.ragged_record` (the one padding exclusion).
"""

from __future__ import annotations

#: The ragged paged attention op, as every kernel of it is checked.
RAGGED = """\
- The n active sequences (num_seqs, or distribution[2]): sequence i < n owns query rows
  cu_q_lens[i]:cu_q_lens[i+1] and its first kv_lens[i] cache tokens, q_len <= kv_len; its
  queries are its LAST q_len positions (query j sits at kv_len - q_len + j), so a decode
  step is q_len 1 and a prefill chunk any q_len up to kv_len. Token t of the sequence is
  slot t % page_size of page page_indices[i, t // page_size] (a flat table:
  page_indices[i*pages_per_seq + t // page_size]). Query head h reads kv head
  h // (q_heads // kv_heads) (with one kv head, as MLA's latent, every query head).
- Query j sees key t iff t <= its position and, with sliding_window w, t > position - w
  (w keys counting itself: causal, bottom-right over each sequence's own lengths).
  Logits: sm_scale * q.k, then soft_cap * tanh(./soft_cap), then the mask; the attention
  op's softmax in float32. Every query sees its own key: no row is fully masked.
- Padding: query tokens of out at or past cu_q_lens[n] are outside the contract
  (excluded); slots past n of kv_lens, cu_q_lens and page_indices (junk lengths, valid
  pages) and page-table entries past a sequence's last page (valid pages) hold what the
  kernel must ignore.
"""

#: The op in passes with a cache update (rpa v3, its head-dim-64 variant, MLA v2).
PASSES = """\
- distribution = (d, p, n): sequences [0, d) run in the decode pass (q_len 1 each),
  [d, p) in the prefill pass (q_len == chunk_prefill_size each; only with a chunk size),
  [p, n) in the mixed pass; every q_len >= 1.
- The call first writes the new tokens (row j of the sequence's queries) into the cache at
  positions kv_len - q_len + j, then attends over the updated cache. The returned cache is
  compared to the expected one EXACTLY (every slot: owned, unowned, padding pages), unless
  the family names a kind of slot it may leave.
"""

#: The lines a kernel of the passes' contract starts from.
SEMANTICS = RAGGED + PASSES

#: The op's quantized cache, for the kernels that take one (rpa v3 and its head-dim-64
#: variant; not MLA v2).
QUANTIZED = """\
- Quantized caches: kv_dtype float8_e4m3fn with k_scale/v_scale (the real K is the stored
  one times k_scale; V likewise) and q_scale (q / q_scale rounded to fp8 inside the kernel,
  the logits multiplied back; drawn as a power of two). The reference attends with the
  dequantized K/V and q quantized the same way; the cache stays exact.
"""
