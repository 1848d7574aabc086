"""The paged kv-cache write op: new tokens' K and V appended into the pages of a paged
KV cache, every other element of the cache left bit for bit as it was.

- :mod:`.reference`: the independent reference (the ragged kv-update's token slots and
  cache update, :mod:`kernel_harness.ops.paged_attention.kv_update`, with the merged
  interleaved layout) and the cache's bits as an exactly compared output;
- :mod:`.cases`: the case vocabulary (sequences' cached and new lengths, page geometry,
  heads), the poisoned cache, the strategy and events;
- :mod:`.record`: what a family's ``Family`` record takes from the op
  (:func:`~.record.kv_write_record`) and the cache's bits added to its adapter's run;
- :mod:`.export`: the reference's source for exported scripts.
"""
