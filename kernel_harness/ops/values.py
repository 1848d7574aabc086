"""Strategy pieces any op can use: magnitudes drawn anywhere in a range, log-uniformly,
beside an op's menu of designed regimes.

A menu of values (logits near 1e6, eps of 1e-5 or 0.1) reaches the regimes its author
thought of; a kernel wrong only between them (round 12 of the adversarial set scaled a
softmax whose row maximum lay in (-1e8, -1e5), a norm whose variance passed 1e6 or whose
eps lay in [1e-10, 5e-8]) passes every menu. :func:`magnitudes` draws a power of ten
anywhere in a range, in hundredths of a decade (integers shrink, and print as the
power they are), towards its low end.
"""

from __future__ import annotations

from hypothesis import strategies as st

#: Steps a decade is cut into.
STEPS = 100


def magnitudes(low: float, high: float) -> st.SearchStrategy[float]:
    """``10 ** e`` for ``e`` drawn in hundredths from ``[low, high]``, shrinking towards
    ``10 ** low``."""
    if not low <= high:
        raise ValueError(f"magnitudes: low {low} must be <= high {high}")
    return st.integers(round(low * STEPS), round(high * STEPS)).map(
        lambda e: float(10.0 ** (e / STEPS)))
