"""Our HSTU pointwise attention Pallas kernel: public API (:mod:`.api`), host-side
block planning (:mod:`.planning`), forward (:mod:`.forward`) and backward
(:mod:`.backward`) kernels."""
