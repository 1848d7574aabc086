"""Built-in kernel families, one folder each with the same file names:
``kernel.py`` (adapter), ``cases.py`` (case and strategies), ``family.py`` (the record,
with the map of a case onto its op's reference in ``kernel_harness/ops/``)."""
