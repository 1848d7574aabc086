"""Exceptions shared by every floor of the harness."""


class UsageError(Exception):
    """Bad input from the user (an unknown family, an ``--impl`` that does not import,
    a bad flag value): the CLI reports it as one line on stderr and exits 2."""


class PropertyNotApplicable(Exception):
    """The property needs a hook the family does not provide (reported as SKIP, never PASS)."""


class KernelRaceDetected(AssertionError):
    """TPU interpret mode's race detector saw a data race in the kernel."""
