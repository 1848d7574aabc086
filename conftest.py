"""Top-level pytest configuration.

The harness's own pytest plugin (options ``--kh-backend``, ``--kh-impl``,
``--kh-family`` and the Hypothesis profiles) is loaded through its ``pytest11``
entry point once the package is installed; nothing else is needed here.
"""
