"""The softmax op: cases (:mod:`.cases`), the float64 reference (:mod:`.reference`) and
the op's relations (:mod:`.relations`: rows are independent, shift invariance)."""
