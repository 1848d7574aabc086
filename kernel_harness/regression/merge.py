"""Merging the ``--json`` results of several ``check`` runs (shards of one nightly over N
hosts, or the steps of one recipe) into one document, one verdict and one JUnit file.

The merged document follows ``check-results-v1.json`` like each input. Its ``environment``
holds what all inputs agree on; a field that differs is ``null`` where the schema allows it
(``seed``: shards draw with their own seeds; ``device_kind``, ``max_examples``, ``impl``,
``jaxlib``, ``kernel_harness``), and ``environment.merged_from`` lists every input's path and
whole environment, so nothing is lost. Where one value must stand for all and the inputs
disagree (``jax``, ``python``, ``backend``, ``platform``, ``profile``, ``adjustments``,
``jax_numerics``), the merged document could not say so honestly: that is a
:class:`UsageError`, and so is a (family, property) unit that two inputs report differently
(overlapping shards, or one result file given twice); one reported identically by both is
kept once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernel_harness.core.errors import UsageError
from kernel_harness.orchestration import results

SCHEMA = "kernel-harness/check-results"
SCHEMA_VERSION = results.SCHEMA_VERSION
#: The verdicts a unit's record may have: the schema's own list (an INTERRUPTED unit of a
#: preempted shard merges like any other, and counts as not passed).
VERDICTS: tuple[str, ...] = tuple(json.loads(results.SCHEMA_PATH.read_text())["$defs"]
                                  ["property"]["properties"]["verdict"]["enum"])
#: Environment fields one value must stand for: inputs that differ here are refused.
MUST_AGREE = ("jax", "python", "backend", "platform", "profile", "adjustments",
              "jax_numerics")
#: What a field added within version 1 means where an older document lacks it.
_ABSENT_MEANS: dict[str, Any] = {"jax_numerics": {}}
#: Nullable fields: ``null`` in the merged document when the inputs differ.
NULL_WHEN_MIXED = ("kernel_harness", "jaxlib", "device_kind", "seed", "max_examples", "impl")
_RECORD_KEYS = ("family", "property", "backend", "verdict", "examples", "passed_examples",
                "seconds", "events", "failure", "error", "reason")


def load_results(path: Path) -> dict[str, Any]:
    """Reads one ``check --json`` document; anything else is a one-line :class:`UsageError`."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: not JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise UsageError(f"{path}: not a `kernel-harness check --json` document "
                         f"(schema {doc.get('schema') if isinstance(doc, dict) else None!r})")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise UsageError(f"{path}: schema_version {doc.get('schema_version')!r}; this harness "
                         f"merges version {SCHEMA_VERSION}")
    if not isinstance(doc.get("environment"), dict) or not isinstance(doc.get("properties"),
                                                                      list):
        raise UsageError(f"{path}: no environment object or properties list")
    for i, record in enumerate(doc["properties"]):
        missing = [k for k in _RECORD_KEYS if not isinstance(record, dict) or k not in record]
        if missing:
            raise UsageError(f"{path}: properties[{i}] lacks {missing}")
        if record["verdict"] not in VERDICTS:
            raise UsageError(f"{path}: properties[{i}] has verdict {record['verdict']!r}")
    return doc


def _environment(inputs: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    envs = [(label, doc["environment"]) for label, doc in inputs]
    merged = dict(envs[0][1])
    for key in MUST_AGREE:
        values = {json.dumps(env.get(key, _ABSENT_MEANS.get(key)), sort_keys=True): label
                  for label, env in envs}
        if len(values) > 1:
            seen = ", ".join(f"{label} {v}" for v, label in values.items())
            raise UsageError(f"cannot merge: the merged document has one {key} and the inputs "
                             f"differ ({seen}); merge each {key} separately")
    for key in NULL_WHEN_MIXED:
        if len({json.dumps(env.get(key)) for _, env in envs}) > 1:
            merged[key] = None
    notes = list(dict.fromkeys(str(env.get("backend_note", "")) for _, env in envs))
    merged["backend_note"] = "; ".join(n for n in notes if n)
    merged["merged_from"] = [{"path": label, "environment": env} for label, env in envs]
    return merged


def merge_documents(inputs: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """One ``check-results-v1`` document from ``(label, document)`` pairs (labels are the
    paths, for messages and ``environment.merged_from``)."""
    if not inputs:
        raise UsageError("merge: no results files given")
    labels = [label for label, _ in inputs]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise UsageError(f"merge: {twice[0]} given more than once")
    env = _environment(inputs)
    records: list[dict[str, Any]] = []
    where: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    for label, doc in inputs:
        for record in doc["properties"]:
            unit = (record["family"], record["property"])
            if unit in where:
                first, kept = where[unit]
                if kept != record:
                    raise UsageError(
                        f"cannot merge: {unit[0]} / {unit[1]} is in {first} "
                        f"({kept['verdict']}) and in {label} ({record['verdict']}) with "
                        "different results; a unit belongs to one input (overlapping shards?)")
                continue
            where[unit] = (label, record)
            records.append(record)
    return document(env, records)


def document(env: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any]:
    """The document around ``records``, its summary counted from them as ``check --json``
    counts it (:func:`kernel_harness.orchestration.results.document`): ``ok`` only when at
    least one record ran (not SKIP) and every one that ran passed."""
    return results.document(env, records)


def source_of(inputs: Sequence[tuple[str, dict[str, Any]]]) -> dict[tuple[str, str], str]:
    """Which input first reported each (family, property) unit."""
    out: dict[tuple[str, str], str] = {}
    for label, doc in inputs:
        for r in doc["properties"]:
            out.setdefault((r["family"], r["property"]), label)
    return out


def detail(record: dict[str, Any]) -> str:
    """A record's first line of news: the failure's summary, the error, or the skip reason."""
    if record.get("failure"):
        summary = record["failure"].get("summary") or ["outputs outside tolerance"]
        return str(summary[0])
    if record.get("error"):
        return f"{record['error'].get('type')}: {record['error'].get('message')}"[:200]
    return str(record.get("reason") or "")


__all__ = ["MUST_AGREE", "NULL_WHEN_MIXED", "detail", "document", "load_results",
           "merge_documents", "source_of"]
