"""The all-gather matmul op: ``all_gather(x, rows) @ y`` with y's columns sharded, each
device computing its column block from the gathered x (:mod:`.cases`, :mod:`.reference`)."""
