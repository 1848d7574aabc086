"""The attention reference as source text for standalone repro scripts: the scripts
embed the op layer's own :func:`~.reference.visibility`, :func:`~.reference.logits`,
:func:`~.reference.attend` and :func:`~.reference.softmax_attention` (one source of truth,
no template to drift)."""

from __future__ import annotations

import inspect
import textwrap

from kernel_harness.ops.attention import reference, vocabulary

_PRELUDE = f'''\
from typing import Any

HIGHEST = HI
LAYOUTS = {vocabulary.LAYOUTS!r}
NORMALIZE = {reference.NORMALIZE!r}
'''


def op_source() -> str:
    """The source every attention script embeds: ``head_axis``, ``visibility``, ``logits``,
    ``softmax_weights``, ``attend`` and ``softmax_attention``, verbatim."""
    parts = [_PRELUDE, *(inspect.getsource(f) for f in (
        vocabulary.head_axis, reference.visibility, reference.logits, reference.softmax_weights,
        reference.attend, reference.softmax_attention))]
    return "\n\n".join(parts)


def reference_source(body: str) -> str:
    """``body`` (code defining ``reference(x)``, may be indented) after :func:`op_source`;
    the script provides ``jax``, ``jnp``, ``np`` and ``HI``."""
    return op_source() + "\n\n" + textwrap.dedent(body).strip() + "\n"
