"""The user's configuration: ``[tool.kernel-harness]`` in their ``pyproject.toml``.

:func:`load_config` walks up from a directory (the working directory by default) and
reads the first ``pyproject.toml`` that has the table; it stops at a version-control
root (a folder holding ``.git`` or ``.hg``) or the filesystem root, so a checkout never
reads a table from a folder above it. Keys::

    [tool.kernel-harness]
    family-modules = ["mykernels.family"]  # registered like --family-module
    golden-dir = "tests/golden"            # goldens and gate baselines of your families
    profile = "ci"                          # default --profile
    backend = "interpret"                   # default --backend
    corpus = "tests/corpus"                 # the failure corpus (as --corpus takes it)
    without = {sdpa = ["bias"]}             # features left out of a family in every run

    [[tool.kernel-harness.waivers]]         # a reviewed benign TPU-interpret finding
    family = "mykernel"                     # (fields as in kernel_harness/run/waivers.json)
    kind = "uninitialized-read"
    kernel = "^my_kernel"
    buffer = "scratch"
    reason = "the select discards the value read before the first write"

    [[tool.kernel-harness.known-bugs]]      # a feature left out because the kernel has a
    family = "mykernel"                     # known bug there: every verdict says so
    without = ["kv-lengths"]
    reason = "NaN in V past cache_seqlens turns every output NaN"
    link = "findings/mykernel-decode-nan"   # optional: an issue, a finding

``without`` adds to ``--without`` (each run's report names what the table left out,
and says so); a ``known-bugs`` entry leaves its features out the same way, and every
report names them as a known bug with the entry's reason and link; the ``waivers`` apply
beside the package's reviewed ones
(:mod:`kernel_harness.records.waiver_entries` checks each entry). Paths are relative to
the folder of that ``pyproject.toml``. Reading it imports neither jax nor the harness
(the pytest plugin reads it at start-up); the profile and backend names, and the
features ``without`` names, are checked where they are used (:meth:`HarnessConfig.where`
names the key and file in that error). An explicit flag beats the table, which beats the
built-in default. An unknown key or a value of the wrong type is a
:class:`~kernel_harness.core.errors.UsageError` naming the file, the key and what is
accepted; a ``pyproject.toml`` on the way that is not valid TOML is one too.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kernel_harness.core.errors import UsageError
from kernel_harness.records import waiver_entries

#: The table's name under ``[tool]``.
TABLE = "kernel-harness"

#: Folders that end the walk up (the root of a checkout).
VCS_MARKERS = (".git", ".hg")

#: Key -> what it accepts, in words (for errors and ``docs/your-repository.md``).
KEYS: dict[str, str] = {
    "family-modules": "a list of module names (strings)",
    "golden-dir": "a path (string), relative to the pyproject.toml's folder",
    "profile": "a profile name (string): dev, ci or nightly",
    "backend": "a backend name (string): auto, interpret, tpu-interpret, tpu or gpu",
    "corpus": "a corpus location (string) as --corpus takes it: a directory (relative to "
              "the pyproject.toml's folder), redis://..., github:OWNER/REPO, ro: before any, "
              "several joined by ','",
    "without": "a table of family name -> list of feature names (strings), e.g. "
               "without = {sdpa = [\"bias\"]}",
    "waivers": "a list of tables ([[tool.kernel-harness.waivers]]), each with "
               + waiver_entries.SHAPE,
    "accepted-source": "a list of tables ([[tool.kernel-harness.accepted-source]]), each "
                       "with file (a path relative to the pyproject.toml's folder), kind (as "
                       "the failure names it, e.g. \"branches on the backend\"), text (a part "
                       "of the line) and reason (why the line cannot change what a user gets)",
    "known-bugs": "a list of tables ([[tool.kernel-harness.known-bugs]]), each with family "
                  "(a family name), without (a list of its feature names), reason (what the "
                  "bug is, not empty) and optionally link (an issue, a finding)",
}

#: The fields of a ``known-bugs`` entry: required, then optional.
KNOWN_BUG_FIELDS: tuple[tuple[str, ...], tuple[str, ...]] = (("family", "without", "reason"),
                                                              ("link",))


@dataclasses.dataclass(frozen=True, kw_only=True)
class HarnessConfig:
    """The ``[tool.kernel-harness]`` table of one ``pyproject.toml`` (all unset when no
    file has it).

    Attributes:
      source: the ``pyproject.toml`` read, or None when none had the table.
      family_modules: modules whose Family objects are registered (like
        ``--family-module``); importable from :attr:`root`.
      golden_dir: the golden root (absolute), or None.
      profile: the default profile name, or None.
      backend: the default backend name, or None.
      corpus: the corpus location as ``--corpus`` takes it, its directories made absolute.
      without: ``{family: features}`` every run leaves out (beside ``--without``).
      waivers: the user's waivers of TPU-interpret findings, each entry's fields as text,
        in the file's order (checked: :func:`kernel_harness.records.waiver_entries.checked_entry`).
      known_bugs: features left out of a family because its kernel has a known bug there:
        each entry ``{"family", "without": [...], "reason", "link"?}``, in the file's order.
      accepted_source: lines of the implementation's source the user reviewed and accepts
        (:mod:`kernel_harness.run.impl_source`): ``{"file" (absolute), "kind", "text",
        "reason"}`` each.
    """

    source: Path | None = None
    family_modules: tuple[str, ...] = ()
    golden_dir: Path | None = None
    profile: str | None = None
    backend: str | None = None
    corpus: str | None = None
    without: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    waivers: tuple[dict[str, str], ...] = ()
    known_bugs: tuple[dict[str, Any], ...] = ()
    accepted_source: tuple[dict[str, str], ...] = ()

    @property
    def root(self) -> Path | None:
        """The folder holding :attr:`source` (where relative paths start)."""
        return None if self.source is None else self.source.parent

    def where(self, key: str) -> str:
        """``KEY in /path/pyproject.toml [tool.kernel-harness]``, for messages."""
        return f"{key} in {self.source} [tool.{TABLE}]"


def find_pyproject(start: Path | None = None) -> Path | None:
    """The first ``pyproject.toml`` with a ``[tool.kernel-harness]`` table from ``start``
    (default: the working directory) upwards, stopping at a VCS or filesystem root."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and TABLE in _read(candidate).get("tool", {}):
            return candidate
        if any((folder / marker).exists() for marker in VCS_MARKERS):
            return None
    return None


def load_config(start: Path | None = None) -> HarnessConfig:
    """The configuration that applies in ``start`` (default: the working directory)."""
    path = find_pyproject(start)
    if path is None:
        return HarnessConfig()
    return parse_table(_read(path)["tool"][TABLE], path)


def parse_table(table: Any, source: Path) -> HarnessConfig:
    """Validates one ``[tool.kernel-harness]`` table read from ``source``."""
    if not isinstance(table, dict):
        raise UsageError(f"{source}: [tool.{TABLE}] must be a table, got {_kind(table)}")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise UsageError(f"{source}: unknown key(s) {unknown} in [tool.{TABLE}]; accepted: "
                         f"{', '.join(KEYS)}")
    for key, value in table.items():
        if key in ("without", "waivers", "known-bugs", "accepted-source"):
            continue  # tables: checked entry by entry below
        ok = (_names(value) if key == "family-modules"
              else isinstance(value, str) and value != "")
        if not ok:
            raise UsageError(f"{source}: [tool.{TABLE}] {key} = {value!r}: expected "
                             f"{KEYS[key]}, got {_kind(value)}")
    root = source.parent
    golden = table.get("golden-dir")
    corpus = table.get("corpus")
    return HarnessConfig(
        source=source,
        family_modules=tuple(table.get("family-modules", ())),
        golden_dir=None if golden is None else (root / golden).resolve(),
        profile=table.get("profile"),
        backend=table.get("backend"),
        corpus=None if corpus is None else _resolve_location(corpus, root),
        without=_without(table.get("without", {}), source),
        waivers=_waivers(table.get("waivers", []), source),
        known_bugs=_known_bugs(table.get("known-bugs", []), source),
        accepted_source=_accepted_source(table.get("accepted-source", []), source),
    )


def _names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and v for v in value)


def _without(value: Any, source: Path) -> dict[str, tuple[str, ...]]:
    """``without``: family name -> the features every run leaves out (checked against the
    family where a run uses it: an unknown feature is an error naming the known ones)."""
    if not isinstance(value, dict):
        raise UsageError(f"{source}: [tool.{TABLE}] without = {value!r}: expected "
                         f"{KEYS['without']}, got {_kind(value)}")
    for family, features in value.items():
        if not _names(features):
            raise UsageError(
                f"{source}: [tool.{TABLE}] without.{family} = {features!r}: expected a list "
                f"of feature names (strings), e.g. without = {{{family} = [\"FEATURE\"]}} "
                f"(`kernel-harness describe {family}` lists them), got {_kind(features)}")
    return {family: tuple(features) for family, features in value.items()}


def _known_bugs(value: Any, source: Path) -> tuple[dict[str, Any], ...]:
    """``known-bugs``: each entry's fields checked (the features against the family where a
    run uses it, as ``without``'s)."""
    if not isinstance(value, list):
        raise UsageError(f"{source}: [tool.{TABLE}] known-bugs: expected {KEYS['known-bugs']}, "
                         f"got {_kind(value)}")
    required, optional = KNOWN_BUG_FIELDS
    out = []
    for i, entry in enumerate(value, 1):
        where = f"{source}: [[tool.{TABLE}.known-bugs]] entry {i}"
        if not isinstance(entry, dict):
            raise UsageError(f"{where}: expected a table, got {_kind(entry)}")
        missing = [k for k in required if k not in entry]
        unknown = sorted(set(entry) - set(required) - set(optional))
        if missing or unknown:
            raise UsageError(f"{where}: {'lacks ' + str(missing) if missing else ''}"
                             f"{'; ' if missing and unknown else ''}"
                             f"{'unknown ' + str(unknown) if unknown else ''}: expected "
                             f"{KEYS['known-bugs']}")
        bad = [k for k in ("family", "reason", *(("link",) if "link" in entry else ()))
               if not (isinstance(entry[k], str) and entry[k].strip())]
        if bad or not (_names(entry["without"]) and entry["without"]):
            raise UsageError(f"{where}: {', '.join(bad) or 'without'} must be "
                             f"{'non-empty text' if bad else 'a non-empty list of feature names'}"
                             f": expected {KEYS['known-bugs']}")
        out.append({"family": entry["family"], "without": tuple(entry["without"]),
                    "reason": entry["reason"].strip(), "link": entry.get("link")})
    return tuple(out)


def _accepted_source(value: Any, source: Path) -> tuple[dict[str, str], ...]:
    """``accepted-source``: each entry has exactly file, kind, text and reason, all text."""
    if not isinstance(value, list):
        raise UsageError(f"{source}: [tool.{TABLE}] accepted-source: expected "
                         f"{KEYS['accepted-source']}, got {_kind(value)}")
    fields = ("file", "kind", "text", "reason")
    out = []
    for i, entry in enumerate(value, 1):
        ok = (isinstance(entry, dict) and set(entry) == set(fields)
              and all(isinstance(entry[k], str) and entry[k].strip() for k in fields))
        if not ok:
            raise UsageError(f"{source}: [[tool.{TABLE}.accepted-source]] entry {i}: expected "
                             f"{KEYS['accepted-source']}, all non-empty, got {entry!r}")
        out.append({**{k: entry[k].strip() for k in fields},
                    "file": str((source.parent / entry["file"]).resolve())})
    return tuple(out)


def _waivers(value: Any, source: Path) -> tuple[dict[str, str], ...]:
    """``waivers``: each entry checked as the package's waivers.json entries are."""
    if not isinstance(value, list):
        raise UsageError(f"{source}: [tool.{TABLE}] waivers: expected {KEYS['waivers']}, "
                         f"got {_kind(value)}")
    out = []
    for i, entry in enumerate(value, 1):
        try:
            out.append(waiver_entries.checked_entry(entry))
        except ValueError as e:
            family = entry.get("family") if isinstance(entry, dict) else None
            named = f" (family = {family!r})" if family is not None else ""
            raise UsageError(f"{source}: [[tool.{TABLE}.waivers]] entry {i}{named} {e}"
                             ) from None
    return tuple(out)


def _resolve_location(location: str, root: Path) -> str:
    """A corpus LOCATION with each directory part made absolute from ``root``; the
    ``ro:`` prefix, ``redis://`` and ``github:`` parts are kept as written."""
    parts = []
    for part in (p.strip() for p in location.split(",")):
        prefix, rest = ("ro:", part[3:]) if part.startswith("ro:") else ("", part)
        if rest and not rest.startswith("github:") and "://" not in rest:
            rest = str((root / Path(rest).expanduser()).resolve())
        parts.append(prefix + rest)
    return ",".join(parts)


def _read(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"{path}: cannot read it as TOML: {e}") from None


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list with a non-string or empty item" if value else "an empty list"
    if value == "":
        return "an empty string"
    return f"a {type(value).__name__}"
