"""The attention reference as source text for standalone repro scripts: the scripts
embed the op layer's own :func:`~.reference.visibility`, :func:`~.reference.logits`,
:func:`~.reference.attend` and the one program of :mod:`.program`
(:class:`~.program.Definition`, :func:`~.program.attention_outputs`) verbatim, and call it
with the family's definition (one source of truth, no template to drift)."""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Mapping

from kernel_harness.ops.attention import designs, program, reference, vocabulary

_PRELUDE = f'''\
import dataclasses
import math
from collections.abc import Mapping
from typing import Any

HIGHEST = HI
LAYOUTS = {vocabulary.LAYOUTS!r}
NORMALIZE = {reference.NORMALIZE!r}
LSE_BASES = {program.LSE_BASES!r}
MAGNITUDES = {program.MAGNITUDES!r}
DIFFERENTIABLE = {program.DIFFERENTIABLE!r}
DESIGNS = {designs.DESIGNS!r}  # a script computes the reference: exact math, no design
'''


def op_source() -> str:
    """The source every attention script embeds: ``head_axis``, ``heads_first``,
    ``visibility``, ``logits``, ``softmax_weights``, ``attend``, ``Definition``,
    ``gradient_magnitudes``, ``unmodelled`` and ``attention_outputs``, verbatim."""
    parts = [_PRELUDE, *(inspect.getsource(f) for f in (
        vocabulary.head_axis, vocabulary.heads_first, reference.visibility, reference.logits,
        reference.softmax_weights, reference.attend, program.Definition,
        program.gradient_magnitudes, designs.unmodelled, program.attention_outputs))]
    return "\n\n".join(parts)


def reference_source(body: str) -> str:
    """``body`` (code defining ``reference(x)``, may be indented) after :func:`op_source`;
    the script provides ``jax``, ``jnp``, ``np`` and ``HI``."""
    return op_source() + "\n\n" + textwrap.dedent(body).strip() + "\n"


def call_source(definition: program.Definition, *, arrays: Mapping[str, str], vis: str,
                outputs: Mapping[str, str], doc: str) -> str:
    """A script's whole reference: ``reference(x)`` runs :func:`~.program.attention_outputs`
    under ``definition`` (its repr, the family's own definition object) on ``arrays`` (op name ->
    expression over the script's ``x``, cast to float32) and the visibility expression
    ``vis``, and returns ``outputs`` (op output -> the family's name)."""
    cast = ", ".join(f"{name!r}: jnp.asarray({expr}, jnp.float32)"
                     for name, expr in arrays.items())
    return reference_source(f'''
        DEFINITION = {definition!r}


        def reference(x):
            """{doc}"""
            vis = jnp.asarray({vis}, bool)
            res = attention_outputs(DEFINITION, {{{cast}}}, vis)
            return {{family: res[op] for op, family in {dict(outputs)!r}.items()}}
    ''')
