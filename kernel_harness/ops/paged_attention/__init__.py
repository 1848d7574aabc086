"""The paged attention op: query tokens of each sequence (one for decode, a chunk for a
ragged prefill) against a paged KV cache, and the cache update some kernels do in the call.

Shared by every paged kernel family (gpu-paged, tpu-paged, tpu-ragged-paged, and rpa v3,
its head-dim-64 variant and MLA v2 from tpu-inference; gpu-decode takes its reference):

- :mod:`.reference`: the independent plain-jnp decode attention (float32, HIGHEST) and
  the gather of a row's tokens through its page table;
- :mod:`.strategy`: the canonical case vocabulary (``q_heads`` / ``kv_heads``,
  ``page_size``, ``pages_per_seq``, ``lengths``) and the base strategy pieces (lengths on
  page and block edges, head groupings, page tables, poisoned slots);
- :mod:`.events`: the events every paged kernel reports;
- :mod:`.layout`: how a family lays the op's arrays out (:class:`PagedLayout`), which
  the relations read;
- :mod:`.relations`: the op's metamorphic relations (page permutation, unseen slots,
  compute-block invariance, GQA = MHA);
- :mod:`.semantics`: what the ragged op means (the contract text its families start from);
- :mod:`.sequences`, :mod:`.ragged`, :mod:`.passes`: a ragged batch of sequences (prefill
  and decode mixed) over the cache, the ragged reference and kernels' capabilities, and
  the passes of a call that updates the cache (their modes and seed layouts);
- :mod:`.kv_update`: the cache update and the attention over the updated cache;
- :mod:`.ragged_record`, :mod:`.keywords`: a ragged family's record fields (the one
  padding exclusion) and the keywords the ragged kernels share;
- :mod:`.record`, :mod:`.export`: a paged family's record fields and script source.
"""
