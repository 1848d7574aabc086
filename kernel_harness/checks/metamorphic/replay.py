"""Recording and replaying what a metamorphic example drew (issue 11).

A metamorphic property draws more than its case: which side to perturb, which positions,
which block variant or toggle. :class:`Recorder` wraps Hypothesis's ``data`` and keeps each
drawn value in a JSON form (:func:`encode`); :class:`Replayer` hands the same values back
in the same order, so ``kernel-harness repro FAMILY --property P --case JSON --draws JSON``
reruns exactly the failing example: same case, same perturbation, no search.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

_PRIMITIVES = (bool, int, float, str, type(None))


class NotReplayable(ValueError):
    """A drawn value that has no JSON form (the failure then says so)."""


def encode(value: Any, strategy: Any) -> dict[str, Any]:
    """The JSON form of one drawn value: the value itself, a case's JSON, or the index of
    the value among a ``sampled_from`` strategy's elements."""
    if isinstance(value, _PRIMITIVES):
        return {"value": value}
    if hasattr(value, "to_json") and hasattr(type(value), "from_json"):
        return {"case": json.loads(value.to_json())}
    elements = getattr(strategy, "elements", None)
    if elements is not None:
        for i, e in enumerate(elements):
            if e is value:
                return {"index": i}
    raise NotReplayable(f"cannot record a drawn {type(value).__name__} ({value!r})")


def decode(item: dict[str, Any], strategy: Any, case_type: type) -> Any:
    """The drawn value back from :func:`encode`'s form (``case_type`` builds cases)."""
    if "value" in item:
        return item["value"]
    if "case" in item:
        return case_type.from_json(json.dumps(item["case"]))
    elements = getattr(strategy, "elements", None)
    if elements is None:
        raise ValueError(f"draw {item.get('label')!r}: recorded as an index, but the strategy "
                         "now is not a sampled_from")
    return list(elements)[item["index"]]


class Recorder:
    """Stands in for Hypothesis's ``data`` in a metamorphic body: draws through it and
    records every value (with its label) in :attr:`draws`."""

    def __init__(self, data: st.DataObject):
        self._data = data
        self.draws: list[dict[str, Any]] = []
        self.replayable: str | None = None  # why not, when a value has no JSON form

    def draw(self, strategy: st.SearchStrategy[Any], label: Any = None) -> Any:
        """Draws from ``strategy`` (as ``data.draw``) and records the value."""
        value = self._data.draw(strategy, label=label)
        try:
            self.draws.append({"label": label, **encode(value, strategy)})
        except NotReplayable as e:
            self.replayable = str(e)
        return value

    def to_json(self) -> str:
        """The recorded draws as one JSON line (for ``--draws``)."""
        return json.dumps(self.draws, separators=(",", ":"))


class Replayer:
    """Stands in for ``data`` when replaying: returns the recorded values in order, and
    fails loudly if the body asks for something else (a different label, or more draws)."""

    def __init__(self, draws_json: str, case_type: type):
        try:
            self._draws = list(json.loads(draws_json))
        except (json.JSONDecodeError, TypeError) as e:
            raise ValueError(f"--draws is not a JSON list: {e}") from None
        self._case_type = case_type
        self._next = 0
        self.replayable: str | None = None

    def to_json(self) -> str:
        """The draws being replayed, as one JSON line."""
        return json.dumps(self._draws, separators=(",", ":"))

    def draw(self, strategy: st.SearchStrategy[Any], label: Any = None) -> Any:
        """The next recorded value (its label must be ``label``)."""
        if self._next >= len(self._draws):
            raise ValueError(f"--draws has {len(self._draws)} value(s); the property asked "
                             f"for another ({label!r}): the draws belong to another property "
                             "or another version of it")
        item = self._draws[self._next]
        self._next += 1
        if item.get("label") != label:
            raise ValueError(f"--draws value {self._next} is for {item.get('label')!r}, the "
                             f"property asked for {label!r}")
        return decode(item, strategy, self._case_type)

    def finished(self) -> None:
        """Raises unless every recorded value was used."""
        if self._next != len(self._draws):
            raise ValueError(f"--draws has {len(self._draws)} values; the property used "
                             f"{self._next}")
