"""Top-level pytest configuration.

The harness's own pytest plugin (options ``--kh-backend``, ``--kh-impl``,
``--kh-family`` and the Hypothesis profiles) is loaded through its ``pytest11``
entry point once the package is installed; nothing else is needed here.
"""

import os

# The suite's in-process CLI runs must not write to (or read from) the user's compile cache;
# tests of the cache pass their own directory.
os.environ.setdefault("KERNEL_HARNESS_COMPILE_CACHE", "off")
