"""The row-norm op (layer_norm, rms_norm): cases (:mod:`.cases`), the float64 reference
and its vjp (:mod:`.reference`) and the op's relations (:mod:`.relations`: rows are
independent, scale equivariance with eps, layer_norm's shift invariance)."""
