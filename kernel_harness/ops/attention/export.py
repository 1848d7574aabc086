"""The attention reference as source text for standalone repro scripts: the scripts
embed the op layer's own :func:`~.reference.visibility` and
:func:`~.reference.softmax_attention` (one source of truth, no template to drift)."""

from __future__ import annotations

import inspect
import textwrap

from kernel_harness.ops.attention import reference, vocabulary

_PRELUDE = f'''\
from typing import Any

HIGHEST = HI
LAYOUTS = {vocabulary.LAYOUTS!r}
'''


def reference_source(body: str) -> str:
    """``body`` (code defining ``reference(x)``, may be indented) after the source of
    ``head_axis``, ``visibility`` and ``softmax_attention``; the script provides ``jax``,
    ``jnp``, ``np`` and ``HI``."""
    parts = [_PRELUDE, *(inspect.getsource(f) for f in (
        vocabulary.head_axis, reference.visibility, reference.softmax_attention))]
    return "\n\n".join([*parts, textwrap.dedent(body).strip()]) + "\n"
