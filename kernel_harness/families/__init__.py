"""Built-in kernel families, one folder each with the same file names:
``kernel.py`` (adapter), ``reference.py``, ``cases.py`` (strategies), ``family.py``."""
