"""Where a family's golden files and gate baseline live (its golden root).

The first of these that applies, for every golden and gate command and the mutate
columns alike:

1. an explicit root (``--golden-dir DIR``);
2. ``$KERNEL_HARNESS_GOLDEN_DIR``;
3. ``golden-dir`` in the user's ``[tool.kernel-harness]`` (:mod:`kernel_harness.records.config`);
4. for a built-in family, the goldens that ship with the harness: ``golden/`` of the
   source checkout when the package runs from one (where this repository records
   them), else the package data ``kernel_harness/_golden_data`` of an installed wheel,
   which is read-only: nothing is ever recorded into an installed package;
5. for any other family, ``golden/`` in the working directory.

A user's families keep their goldens in the user's repository (2, 3 or 5).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from kernel_harness.records.config import load_config
from kernel_harness.records.registry import BUILTIN_FAMILIES

#: Environment variable naming the golden root.
GOLDEN_DIR_ENV = "KERNEL_HARNESS_GOLDEN_DIR"

_PACKAGE = Path(__file__).resolve().parents[2]  # .../kernel_harness
#: The built-in families' goldens inside an installed package (a wheel's package data).
PACKAGED = _PACKAGE / "_golden_data"
#: The built-in families' goldens in a source checkout (the repository's ``golden/``).
CHECKOUT = _PACKAGE.parent / "golden"


@dataclasses.dataclass(frozen=True, kw_only=True)
class GoldenRoot:
    """A resolved golden root: the folder holding ``<family>/``, where that choice came
    from (for messages) and whether the harness may write there."""

    path: Path
    source: str
    writable: bool = True


def resolve(family_name: str, explicit: Path | None = None) -> GoldenRoot:
    """The golden root of family ``family_name`` (see the module docstring)."""
    if explicit is not None:
        return GoldenRoot(path=Path(explicit), source="--golden-dir")
    env = os.environ.get(GOLDEN_DIR_ENV)
    if env:
        return GoldenRoot(path=Path(env), source=f"${GOLDEN_DIR_ENV}")
    config = load_config()
    if config.golden_dir is not None:
        return GoldenRoot(path=config.golden_dir, source=config.where("golden-dir"))
    return shipped(family_name) or GoldenRoot(path=Path("golden"), source="the default ./golden")


def shipped(family_name: str) -> GoldenRoot | None:
    """The goldens that ship with the harness, for a built-in family (None for others, or
    where none ship): the source checkout's ``golden/``, else the installed package data."""
    if family_name in BUILTIN_FAMILIES:
        if (CHECKOUT / "splash").is_dir():
            return GoldenRoot(path=CHECKOUT, source="the source checkout's golden/")
        if PACKAGED.is_dir():
            return GoldenRoot(path=PACKAGED, source="the goldens installed with kernel-harness",
                              writable=False)
    return None


def shipped_hint(family_name: str, manifest: str) -> str:
    """"; <where> has FAMILY's: `--golden-dir PATH`" where goldens of ``family_name`` ship
    with the harness (a user's own golden root holds only their families), else ""."""
    ships = shipped(family_name)
    if ships is None or not (ships.path / family_name / manifest).is_file():
        return ""
    return f"; {ships.source} has {family_name}'s: `--golden-dir {ships.path}`"
