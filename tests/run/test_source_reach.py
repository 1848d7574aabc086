"""The source check reads what decides the implementation's behaviour wherever it is
written: import-time code that binds a name the implementation reads, the methods of a
class (or of an object) it names, a name computed from ``interpret``, an index chosen by it,
strftime, a counter kept with ``x = x + 1`` or ``append`` (round 5 of the adversarial set
found each unread), ``getattr(sys, <computed>)``, a counter kept in a file, a clock read
through ``uuid.uuid1`` (round 6). An honest wrapper that passes the setting on has no finding."""

from __future__ import annotations

import pytest

from kernel_harness.run import impl_source, source_rules
from tests.helpers import source_cheats as cheats


@pytest.mark.parametrize(("name", "kind", "what"), [
    ("import_time_observer", source_rules.OBSERVES, "sys.modules"),
    ("class_counter", source_rules.STATE, "updates _Calls"),
    ("list_counter", source_rules.STATE, "changes _SEEN (append)"),
    ("derived_backend", source_rules.BACKEND, "a value computed from `interpret`"),
    ("indexed_backend", source_rules.BACKEND, "an index on `interpret`"),
    ("strftime_bomb", source_rules.CLOCK, "time.strftime"),
    ("computed_lookup", source_rules.OBSERVES, "reads sys's attributes by a computed name"),
    ("file_counter", source_rules.STATE, "reads or writes a file (open)"),
    ("uuid_clock", source_rules.CLOCK, "uuid.uuid1"),
])
def test_each_is_found_with_its_kind(name: str, kind: str, what: str) -> None:
    found = impl_source.findings(getattr(cheats, name))
    assert [(f.kind, f.what) for f in found if f.kind == kind and what in f.what], found
    assert all(f.file.endswith("source_cheats.py") for f in found)


def test_an_honest_wrapper_has_no_finding() -> None:
    assert impl_source.findings(cheats.honest) == ()
    # Packed unchanged into a tuple to be passed on: not a value computed from it (round 7
    # failed an implementation for that line, not for its bug); testing the packed element
    # is still a branch on it.
    assert impl_source.findings(cheats.honest_packer) == ()
    found = impl_source.findings(cheats.packed_then_tested)
    assert [f for f in found if f.kind == source_rules.BACKEND and "opts[1]" in f.text], found
