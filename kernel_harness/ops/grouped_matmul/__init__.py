"""The grouped (ragged) matmul op: cases (:mod:`.cases`), the one-hot reference
(:mod:`.reference`) and the op's relations (:mod:`.relations`: permuting groups,
splitting a group, inserting an empty group)."""
