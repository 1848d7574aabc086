"""The paged-decode op: one (or a few) query tokens per sequence against a paged KV cache.

Shared by every decode kernel family (gpu-decode, gpu-paged, tpu-paged,
tpu-ragged-paged):

- :mod:`.reference`: the independent plain-jnp decode attention (float32, HIGHEST) and
  the gather of a row's tokens through its page table;
- :mod:`.strategy`: the canonical case vocabulary (``q_heads`` / ``kv_heads``,
  ``page_size``, ``pages_per_seq``, ``lengths``) and the base strategy pieces (lengths on
  page and block edges, head groupings, page tables, poisoned slots);
- :mod:`.events`: the events every paged kernel reports;
- :mod:`.layout`: how a family lays the op's arrays out (:class:`PagedLayout`), which
  the relations read;
- :mod:`.relations`: the op's metamorphic relations (page permutation, unseen slots,
  compute-block invariance, GQA = MHA).
"""
