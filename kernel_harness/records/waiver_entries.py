"""What one waiver of a TPU-interpret finding says, and the one check of it.

A waiver is a reviewed benign finding (:mod:`kernel_harness.run.diagnostics`). The
package's reviewed ones are in ``kernel_harness/run/waivers.json``; a user's are
``[[tool.kernel-harness.waivers]]`` entries of their ``pyproject.toml``
(:mod:`kernel_harness.records.config`). Both are checked here, by the same rule: every
entry names ``family`` (or ``*``), ``kind``, ``kernel`` and ``buffer`` (regular
expressions) and says why the finding is benign (``reason``); ``line`` (a regular
expression) and ``jax`` (version clauses) narrow it further. Pure Python: the
configuration is read before jax is imported.
"""

from __future__ import annotations

import re
from typing import Any

#: The kinds of finding the diagnostics report (``kernel_harness.run.findings``).
FINDING_KINDS: tuple[str, ...] = ("race", "uninitialized-read")

#: Fields every waiver has, and those it may add.
REQUIRED: tuple[str, ...] = ("family", "kind", "kernel", "buffer", "reason")
OPTIONAL: tuple[str, ...] = ("line", "jax")

#: What an entry holds, in words (for errors and the docs).
SHAPE = (f"family (a family name, or \"*\"), kind ({' or '.join(FINDING_KINDS)}), kernel and "
         "buffer (regular expressions searched in the finding's texts), reason (why the "
         "finding is benign), optionally line (a regular expression for the source line) "
         "and jax (versions, e.g. \"<0.12\")")


def _parse_version(text: str) -> tuple[int, ...]:
    parts = text.strip().split(".")
    if not text.strip() or not all(p.isdigit() for p in parts):
        raise ValueError(f"not a jax version: {text!r}")
    return tuple(int(p) for p in parts)


def jax_version_matches(spec: str, version: tuple[int, ...]) -> bool:
    """``spec`` is empty (any version) or comma-separated ``<V``, ``<=V``, ``>=V``, ``>V``,
    ``==V`` clauses (``==0.12`` matches every 0.12.x)."""
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        op = next((o for o in ("<=", ">=", "==", "<", ">") if clause.startswith(o)), None)
        if op is None:
            raise ValueError(f"jax version clause {clause!r}: start it with <, <=, >=, > or ==")
        bound = _parse_version(clause[len(op):])
        v = version[:len(bound)] if op == "==" else version
        ok = {"<": v < bound, "<=": v <= bound, ">=": v >= bound, ">": v > bound,
              "==": v == bound}[op]
        if not ok:
            return False
    return True


def checked_entry(entry: Any) -> dict[str, str]:
    """``entry``'s fields, if it is a well-formed waiver; else a ValueError saying what is
    wrong and what it needs (the caller names the file and the entry)."""
    if not isinstance(entry, dict):
        raise ValueError(f"is {type(entry).__name__} {entry!r}, not a table of {SHAPE}")
    missing = [k for k in REQUIRED if k not in entry]
    if missing:
        raise ValueError(f"lacks {missing}: a waiver needs {SHAPE}")
    unknown = sorted(set(entry) - {*REQUIRED, *OPTIONAL})
    if unknown:
        raise ValueError(f"has unknown field(s) {unknown}: a waiver has {SHAPE}")
    not_text = [k for k, v in entry.items() if not isinstance(v, str)]
    if not_text:
        raise ValueError(f"field(s) {not_text} must be strings (quote them)")
    if entry["kind"] not in FINDING_KINDS:
        raise ValueError(f"has unknown kind {entry['kind']!r}: one of "
                         f"{', '.join(FINDING_KINDS)}")
    if not entry["reason"].strip():
        raise ValueError("needs a reason: say why the finding is benign (what discards the "
                         "value, what the contract excludes)")
    if not entry["family"].strip():
        raise ValueError("needs a family: a family name, or \"*\" for any")
    for field in ("kernel", "buffer", "line"):
        try:
            re.compile(entry.get(field, ""))
        except re.error as e:
            raise ValueError(f"{field}: bad regular expression: {e}") from None
    try:
        jax_version_matches(entry.get("jax", ""), (0,))
    except ValueError as e:
        raise ValueError(f"jax: {e}") from None
    return {k: entry[k] for k in (*REQUIRED, *OPTIONAL) if k in entry}
