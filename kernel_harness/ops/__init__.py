"""Operations: what every kernel of one operation shares.

An op package (``ops/attention``, ``ops/paged_attention``, ``ops/grouped_matmul``,
``ops/norm``, ``ops/softmax``) owns the op's canonical case vocabulary, its independent
plain-jnp reference (and the low-precision twin the calibrated judge measures against),
the base case strategy, the events every kernel of the op reports and the op's
metamorphic relations (:class:`kernel_harness.records.relations.Relation`). A family
(``kernel_harness.families.<kernel>``) is then the adapter record of one kernel: its
entry point, its layout mapping onto the op's case, its contract exclusions, its
tolerances with their reasons and its own extra strategy knobs.

Floors: ops import only ``spec`` and ``core``; families import ops, spec and core.
"""
