"""One stored failure of the corpus: the harness's own readable JSON, not Hypothesis's
choice sequence, so it survives a change of the family's strategy.

An entry names a (family, property) unit, holds the shrunk case as the case type's JSON
and, for a metamorphic property, the values the example drew besides its case (the
``--draws`` JSON of its repro line). Its id hashes only what identifies the failure
(family, property, case, draws): the same failure found twice, on two hosts or two
nights, is one entry.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
from typing import Any

import jax

from kernel_harness.checks.matches_reference import HarnessFailure
from kernel_harness.checks.metamorphic import MetamorphicFailure
from kernel_harness.core.backends import Backend
from kernel_harness.core.errors import UsageError
from kernel_harness.run.crash import KernelCrash

#: The ``schema`` field of every stored entry; an entry with another is refused.
SCHEMA = "kernel-harness-corpus-entry/1"
_FORMAT = SCHEMA.rsplit("/", 1)[0] + "/"


class CorpusError(UsageError):
    """A corpus cannot be opened, read or written as asked (the message says which and
    why): bad input, so the CLI reports it as one line and exits 2."""


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def entry_id(family: str, prop: str, case: dict[str, Any], draws: Any) -> str:
    """The stable id of a failure: 16 hex digits of sha256 over family, property, case and
    draws (canonical JSON), nothing that differs between two finds of the same failure."""
    text = _canonical([family, prop, case, draws])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True, kw_only=True)
class CorpusEntry:
    """One stored failing example.

    Attributes:
      family, prop: the unit it belongs to (``prop`` is the property name, e.g.
        ``matches-reference``).
      case: the shrunk case, as its case type's JSON object.
      draws: what a metamorphic example drew besides its case (parsed ``--draws`` JSON),
        None for ``matches-reference``.
      first_line: the first line of the failure's report, as it was printed.
      backend, device_kind, jax_version: where it was found.
      impl: the ``--impl`` spec it was found with (None: the family's own kernel).
      date: when it was recorded, UTC, ``YYYY-MM-DDTHH:MM:SSZ``.
      id: :func:`entry_id` of family, prop, case and draws.
    """

    family: str
    prop: str
    case: dict[str, Any]
    draws: Any
    first_line: str
    backend: str
    device_kind: str
    jax_version: str
    impl: str | None
    date: str
    id: str

    def __post_init__(self) -> None:
        want = entry_id(self.family, self.prop, self.case, self.draws)
        if self.id != want:
            raise CorpusError(f"corpus entry {self.id}: its id does not match its contents "
                              f"(expected {want}); the entry was edited or is corrupt")

    @property
    def case_json(self) -> str:
        """The case as one JSON line (what ``--case`` takes)."""
        return _canonical(self.case)

    @property
    def draws_json(self) -> str | None:
        """The draws as one JSON line (what ``--draws`` takes), None for matches-reference."""
        return None if self.draws is None else _canonical(self.draws)

    def to_json(self) -> str:
        """The stored form: one canonical JSON object (sorted keys)."""
        data = dataclasses.asdict(self)
        data["property"] = data.pop("prop")
        return _canonical({"schema": SCHEMA, **data})

    @classmethod
    def from_json(cls, text: str | bytes) -> CorpusEntry:
        """Inverse of :meth:`to_json`; anything else is a :class:`CorpusError`."""
        try:
            try:
                data = json.loads(text)
            except ValueError as e:
                raise CorpusError(f"not valid JSON ({e})") from None
            schema = data.get("schema") if isinstance(data, dict) else None
            if isinstance(schema, str) and schema.startswith(_FORMAT) and schema != SCHEMA:
                raise CorpusError(f"of format version {schema.removeprefix(_FORMAT)!r}, and "
                                  f"this kernel-harness reads {SCHEMA} only (a newer "
                                  "kernel-harness wrote it?)")
            if not isinstance(data, dict) or data.get("schema") != SCHEMA:
                raise CorpusError(f"not a {SCHEMA} entry (schema "
                                  f"{data.get('schema') if isinstance(data, dict) else None!r})")
            data = dict(data)
            del data["schema"]
            data["prop"] = data.pop("property")
            return cls(**data)
        except CorpusError:
            raise
        except (ValueError, KeyError, TypeError) as e:
            raise CorpusError(f"malformed corpus entry: {type(e).__name__}: {e}") from None

    def line(self) -> str:
        """One line for ``corpus list``: id, unit, where and when found, the failure."""
        impl = f" impl={self.impl}" if self.impl else ""
        return (f"{self.id}  {self.family} {self.prop}  {self.backend}{impl}  "
                f"{self.date}  {self.first_line}")


def _device_kind(backend: Backend) -> str:
    try:
        return backend.device.device_kind
    except RuntimeError:
        return "unknown"


def entry_from_failure(
    *, family: str, prop: str, case: Any, draws_json: str | None, first_line: str,
    backend: Backend, impl_spec: str | None,
) -> CorpusEntry:
    """The entry for a failing example as a run has it: the case object (shrunk), the
    ``--draws`` JSON of a metamorphic failure (None for matches-reference), the first
    line of its report, the backend and the ``--impl`` spec (None: the family's kernel).
    Device kind, jax version and date are read here."""
    if prop == "lowers-for-tpu":
        raise ValueError(f"{prop}: only matches-reference and metamorphic failures are "
                         "stored (their cases replay)")
    if (prop == "matches-reference") != (draws_json is None):
        raise ValueError(f"{prop}: draws_json is for metamorphic properties only, and "
                         "every metamorphic failure has one")
    case_data = json.loads(case.to_json())
    draws = None if draws_json is None else json.loads(draws_json)
    return CorpusEntry(
        family=family, prop=prop, case=case_data, draws=draws,
        first_line=first_line.strip().splitlines()[0] if first_line.strip() else "",
        backend=backend.name, device_kind=_device_kind(backend),
        jax_version=jax.__version__, impl=impl_spec,
        date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        id=entry_id(family, prop, case_data, draws),
    )


def failure_of(error: BaseException) -> tuple[Any, str | None, str] | None:
    """``(case, draws_json, first_line)`` of a property's failure, as a
    :class:`~kernel_harness.checks.properties.PropertyOutcome` holds it in ``error``
    (after shrinking: the smallest example), or None when the error is no failing
    example (a harness error, a health check): such a failure is not stored."""
    if isinstance(error, HarnessFailure):
        return error.result.case, None, str(error).splitlines()[0]
    if isinstance(error, KernelCrash):
        return error.crash.case, None, error.crash.summary_line()
    if isinstance(error, MetamorphicFailure) and error.case is not None:
        if error.draws_json is None:  # not replayable (the report says why): not storable
            return None
        return error.case, error.draws_json, str(error).splitlines()[0]
    return None
