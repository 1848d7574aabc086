"""An out-of-tree kernel-harness family: a fused RMSNorm written in Pallas.

``kernel`` (the Pallas kernel, forward and custom-VJP backward), ``cases`` (the
case description and its Hypothesis strategy), ``reference`` (plain numpy,
float64), ``family`` (``FAMILY``, declared through the ``kernel_harness.families``
entry point) and ``bugs`` (a planted bug the check must catch).
"""
