"""``python -m kernel_harness.cli``: the same as the ``kernel-harness`` script."""

import sys

from kernel_harness.cli import main

sys.exit(main())
