"""Storing golden files: named regression cases as ``.npz`` arrays plus JSON metadata.

Layout, per family, under its golden root (:mod:`kernel_harness.regression.golden.location`:
``--golden-dir``, ``$KERNEL_HARNESS_GOLDEN_DIR``, the user's ``golden-dir``, else for a
built-in family the goldens shipped with the harness)::

    golden/<family>/cases.json     the manifest: named cases, their tags and why each exists
    golden/<family>/<name>.npz     inputs and reference outputs (gradients included)
    golden/<family>/<name>.json    metadata: schema, versions, backend, case, tolerances, hashes

Arrays whose dtype numpy cannot store without pickle (bfloat16 and other
ml_dtypes) are stored losslessly as an unsigned-integer view; the metadata
names the real dtype. Files are loaded with ``allow_pickle=False`` and their
sha256 checked; anything corrupt, missing or inconsistent is a
:class:`GoldenError` that names the file.

"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import zipfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.core.case import Arrays
from kernel_harness.core.tolerance import GLOBAL_SCALE_ONLY, Tolerance
from kernel_harness.records.family import Family
from kernel_harness.regression.golden import location

SCHEMA_VERSION = 1
MANIFEST = "cases.json"

#: The stored and the fresh reference run the same plain-jnp code in float32 at HIGHEST
#: precision on the same backend and jax version; anything above this (relative to the
#: output's scale) means the reference itself changed.
REFERENCE_DRIFT_TOL = Tolerance(
    max_rel_err=1e-5, reason="same reference code, same jax and backend: only rounding noise",
    slice_floor=GLOBAL_SCALE_ONLY,
)

#: The reference recomputed on another platform or device kind than the one a golden was
#: recorded on (interpret on CPU -> a TPU or a GPU): the same float32 HIGHEST code, but the
#: order of summation and the rounding of exp/log/tanh differ, a few ulp each, growing with
#: the length of a reduction. Ten times the one-device bound, still far below every family's
#: kernel tolerance, so a reference that moves by more is news, not noise.
CROSS_DEVICE_DRIFT_TOL = Tolerance(
    max_rel_err=1e-4, reason="same reference code on another platform or device kind: "
    "summation order and transcendental rounding differ", slice_floor=GLOBAL_SCALE_ONLY,
)

_INPUT, _REF = "input.", "reference."


class GoldenError(Exception):
    """A golden file is missing, corrupt, or does not match its metadata or manifest."""


def default_root(family_name: str) -> Path:
    """The golden root of ``family_name`` when no ``--golden-dir`` is given (``$KERNEL_HARNESS_
    GOLDEN_DIR``, the user's ``golden-dir``, the harness's own goldens for a built-in family,
    else ``./golden``: :func:`kernel_harness.regression.golden.location.resolve`)."""
    return location.resolve(family_name).path


def writable_root(family_name: str, root: Path | None = None) -> Path:
    """The golden root that recording ``family_name`` writes to; a GoldenError when that is
    the goldens installed with the package (never written: name a directory)."""
    where = location.resolve(family_name, root)
    if not where.writable:
        raise GoldenError(
            f"{family_name}: its goldens come from {where.source} ({where.path}), which is "
            f"never written; record into your own directory with --golden-dir DIR, "
            f"${location.GOLDEN_DIR_ENV} or golden-dir in [tool.kernel-harness] of your "
            f"pyproject.toml"
        )
    return where.path


@dataclasses.dataclass(frozen=True, kw_only=True)
class GoldenCase:
    """One named case of a family's manifest.

    Attributes:
      name: file stem, ``[a-z0-9_-]``.
      case: the family's case description.
      tags: e.g. ``("ci",)``; ``--tag`` selects by these.
      why: which hard path or past bug this case pins.
    """

    name: str
    case: Any
    tags: tuple[str, ...] = ()
    why: str = ""

    def __post_init__(self) -> None:
        ok = set("abcdefghijklmnopqrstuvwxyz0123456789_-")
        if not self.name or not set(self.name) <= ok:
            raise ValueError(f"golden case name must be [a-z0-9_-]+, got {self.name!r}")


def family_dir(family_name: str, root: Path | None = None) -> Path:
    """The folder holding one family's golden files (``root``: an explicit golden root)."""
    return location.resolve(family_name, root).path / family_name


def load_manifest(family: Family, root: Path | None = None) -> list[GoldenCase]:
    """The named cases of ``family``; a missing or malformed manifest is a GoldenError."""
    path = family_dir(family.name, root) / MANIFEST
    if not path.is_file():
        raise GoldenError(
            f"{family.name}: no golden manifest {path} (golden root from "
            f"{location.resolve(family.name, root).source}); pin cases with "
            f"`kernel-harness golden add {family.name} NAME --case JSON`"
            f"{location.shipped_hint(family.name, MANIFEST)}"
        )
    try:
        data = json.loads(path.read_text())
        if data.get("schema_version") != SCHEMA_VERSION or data.get("family") != family.name:
            raise GoldenError(
                f"{path}: expected schema_version {SCHEMA_VERSION} and family {family.name!r}, "
                f"got {data.get('schema_version')!r} / {data.get('family')!r}"
            )
        cases = [
            GoldenCase(
                name=item["name"],
                case=family.case_type.from_json(json.dumps(item["case"])),
                tags=tuple(item.get("tags", ())),
                why=item.get("why", ""),
            )
            for item in data["cases"]
        ]
    except GoldenError:
        raise
    except (ValueError, KeyError, TypeError) as e:
        raise GoldenError(f"{path}: malformed manifest: {type(e).__name__}: {e}") from None
    names = [c.name for c in cases]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise GoldenError(f"{path}: duplicate case names {dupes}")
    return cases


def save_manifest(family: Family, cases: Sequence[GoldenCase], root: Path | None = None) -> Path:
    """Writes the manifest (stable order and formatting, one case per block)."""
    path = writable_root(family.name, root) / family.name / MANIFEST
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "schema_version": SCHEMA_VERSION,
        "family": family.name,
        "cases": [
            {"name": c.name, "tags": list(c.tags), "why": c.why,
             "case": json.loads(c.case.to_json())}
            for c in cases
        ],
    }
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def select(cases: Iterable[GoldenCase], *, names: Sequence[str] = (),
           tags: Sequence[str] = ()) -> list[GoldenCase]:
    """Cases with one of ``names`` (if given) and one of ``tags`` (if given)."""
    cases = list(cases)
    unknown = sorted(set(names) - {c.name for c in cases})
    if unknown:
        raise GoldenError(f"no golden case(s) named {unknown}; known: {[c.name for c in cases]}")
    return [
        c for c in cases
        if (not names or c.name in names) and (not tags or set(tags) & set(c.tags))
    ]


def environment(backend: Backend) -> dict[str, str]:
    """What a stored result depends on besides the code: versions, backend, device."""
    import jaxlib

    try:
        device_kind = backend.device.device_kind
    except RuntimeError:
        device_kind = "unknown"
    return {
        "backend": backend.name,
        "platform": backend.platform,
        "device_kind": device_kind,
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "numpy_version": np.__version__,
    }


#: Environment fields that must agree for stored numbers to be comparable at all.
COMPARABLE_FIELDS = ("backend", "device_kind")
#: Fields that may differ: the numbers are then compared against the family's
#: tolerances (the regression a user cares about across an upgrade), and only the
#: drift-level expectations (bitwise, ``REFERENCE_DRIFT_TOL``) are bound to one version.
VERSION_FIELDS = ("jax_version", "jaxlib_version")


def not_comparable_reason(recorded: dict[str, str], current: dict[str, str]) -> str | None:
    """``None`` if results recorded in ``recorded`` can be compared here as numbers, else
    why not (another backend or device; a jax version difference alone is comparable).
    A golden check then judges the kernel against the reference recomputed here instead
    (:func:`kernel_harness.regression.golden.check.check_golden`); a gate baseline from
    there is not used."""
    diff = _differing(COMPARABLE_FIELDS, recorded, current, lambda k: f"{k}=")
    return diff and f"not comparable: recorded on {diff[0]}; this run has {diff[1]}"


def same_device(recorded: dict[str, str], current: dict[str, str]) -> bool:
    """Whether the reference ran on the same platform and device kind in both (the backend
    name alone, e.g. interpret vs tpu-interpret, does not change how the plain-jnp
    reference computes)."""
    return all(recorded.get(k) == current.get(k) for k in ("platform", "device_kind"))


def version_difference(recorded: dict[str, str], current: dict[str, str]) -> str | None:
    """``None`` if recorded on this jax/jaxlib, else a note naming both versions."""
    diff = _differing(VERSION_FIELDS, recorded, current, lambda k: f"{k.split('_')[0]} ")
    return diff and f"versions differ: recorded on {diff[0]}, this run {diff[1]}"


def _differing(fields: Sequence[str], recorded: dict[str, str], current: dict[str, str],
               label: Callable[[str], str]) -> tuple[str, str] | None:
    """``(recorded values, current values)`` of the ``fields`` that differ, as text."""
    diffs = [k for k in fields if recorded.get(k) != current.get(k)]
    if not diffs:
        return None
    return (", ".join(f"{label(k)}{recorded.get(k)}" for k in diffs),
            ", ".join(f"{label(k)}{current.get(k)}" for k in diffs))


def version_key(version: str) -> tuple[int, ...]:
    """``"0.12.0.1"`` -> ``(0, 12, 0, 1)`` for ordering (non-numeric parts end it)."""
    out = []
    for part in str(version).split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)


# ---------------------------------------------------------------- arrays and hashes


def _plain_numpy(dtype: np.dtype) -> bool:
    return dtype.type.__module__ == "numpy" and dtype.kind in "biuf"


def _encode(arr: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
    arr = np.ascontiguousarray(arr)
    meta = {"dtype": arr.dtype.name, "shape": list(arr.shape)}
    if _plain_numpy(arr.dtype):
        return arr, {**meta, "stored_as": arr.dtype.name}
    if arr.dtype.itemsize not in (1, 2, 4, 8):
        raise GoldenError(f"cannot store dtype {arr.dtype} losslessly")
    view = arr.view(np.dtype(f"uint{8 * arr.dtype.itemsize}"))
    return view, {**meta, "stored_as": view.dtype.name}


def _decode(stored: np.ndarray, meta: dict[str, Any], where: str) -> np.ndarray:
    if stored.dtype.name != meta["stored_as"] or list(stored.shape) != meta["shape"]:
        raise GoldenError(
            f"{where}: stored as {stored.dtype}{list(stored.shape)}, metadata says "
            f"{meta['stored_as']}{meta['shape']}"
        )
    if meta["stored_as"] == meta["dtype"]:
        return stored
    import jax.numpy as jnp

    return stored.view(jnp.dtype(meta["dtype"]))


def arrays_sha256(arrays: Arrays) -> str:
    """sha256 over names, dtype names, shapes and bytes, in name order."""
    h = hashlib.sha256()
    for key in sorted(arrays):
        arr = np.ascontiguousarray(arrays[key])
        h.update(f"{key}|{arr.dtype.name}|{arr.shape}|".encode())
        h.update(arr.tobytes())
    return h.hexdigest()


@dataclasses.dataclass(frozen=True, kw_only=True)
class StoredGolden:
    """A loaded, verified golden: metadata, inputs and reference outputs."""

    meta: dict[str, Any]
    inputs: Arrays
    reference: Arrays


def paths(family_name: str, name: str, root: Path | None = None) -> tuple[Path, Path]:
    """``(npz, json)`` paths of one golden case."""
    d = family_dir(family_name, root)
    return d / f"{name}.npz", d / f"{name}.json"


def write_golden(
    family: Family, gcase: GoldenCase, inputs: Arrays, reference: Arrays,
    *, backend: Backend, kernel_stats: dict[str, float], impl: str, root: Path | None = None,
) -> tuple[Path, Path]:
    """Writes one golden case's ``.npz`` and ``.json`` (overwriting)."""
    npz_path, json_path = paths(family.name, gcase.name, writable_root(family.name, root))
    npz_path.parent.mkdir(parents=True, exist_ok=True)
    stored, arrays_meta = {}, {}
    for prefix, group in ((_INPUT, inputs), (_REF, reference)):
        for key, arr in group.items():
            stored[prefix + key], arrays_meta[prefix + key] = _encode(np.asarray(arr))
    meta = {
        "schema_version": SCHEMA_VERSION,
        "family": family.name,
        "name": gcase.name,
        "tags": list(gcase.tags),
        "why": gcase.why,
        "case_type": f"{family.case_type.__module__}.{family.case_type.__qualname__}",
        "case": json.loads(gcase.case.to_json()),
        "environment": environment(backend),
        "recorded_at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "impl": impl,
        "tolerances": {
            out: family.tolerances.lookup(gcase.case.dtype, out).max_rel_err
            for out in family.output_axes
        },
        "kernel_max_rel_err_at_record": kernel_stats,
        "arrays": arrays_meta,
        "sha256": {"inputs": arrays_sha256(inputs), "reference": arrays_sha256(reference)},
    }
    with open(npz_path, "wb") as f:
        np.savez_compressed(f, **stored)
    json_path.write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return npz_path, json_path


def same_case(stored: Any, case: Any) -> bool:
    """Whether a case description stored as JSON (a golden file, a gate baseline) is ``case``.

    Compared as cases, not as JSON text: a field added later with a default (logit_scale)
    is absent from older files and means the same case. A stored description that does not
    load raises the case type's ValueError/TypeError."""
    return type(case).from_json(json.dumps(stored)) == case


def load_golden(family: Family, gcase: GoldenCase, root: Path | None = None) -> StoredGolden:
    """Loads and verifies one golden case; any inconsistency is a :class:`GoldenError`."""
    npz_path, json_path = paths(family.name, gcase.name, root)
    for p in (npz_path, json_path):
        if not p.is_file():
            raise GoldenError(
                f"missing golden file {p}; record it with "
                f"`kernel-harness golden record {family.name} --case {gcase.name}`"
            )
    try:
        meta = json.loads(json_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise GoldenError(f"{json_path}: corrupt metadata: {e}") from None
    if meta.get("schema_version") != SCHEMA_VERSION:
        raise GoldenError(
            f"{json_path}: schema_version {meta.get('schema_version')!r}, this harness reads "
            f"{SCHEMA_VERSION}; re-record with --force"
        )
    if meta.get("family") != family.name or meta.get("name") != gcase.name:
        raise GoldenError(f"{json_path}: holds {meta.get('family')}/{meta.get('name')}")
    try:
        same = same_case(meta.get("case"), gcase.case)
    except (ValueError, TypeError) as e:
        raise GoldenError(f"{json_path}: stored case does not load: {e}") from None
    if not same:
        raise GoldenError(
            f"{json_path}: stored case {json.dumps(meta.get('case'))} differs from the manifest's "
            f"{gcase.case.to_json()}; re-record with --force"
        )
    try:
        with np.load(npz_path, allow_pickle=False) as npz:
            raw = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise GoldenError(f"{npz_path}: corrupt array file: {type(e).__name__}: {e}") from None
    arrays_meta = meta.get("arrays", {})
    if set(raw) != set(arrays_meta):
        raise GoldenError(
            f"{npz_path}: arrays {sorted(raw)} do not match the metadata's {sorted(arrays_meta)}"
        )
    decoded = {k: _decode(raw[k], arrays_meta[k], f"{npz_path}[{k}]") for k in raw}
    inputs = {k[len(_INPUT):]: v for k, v in decoded.items() if k.startswith(_INPUT)}
    reference = {k[len(_REF):]: v for k, v in decoded.items() if k.startswith(_REF)}
    for label, group in (("inputs", inputs), ("reference", reference)):
        if arrays_sha256(group) != meta["sha256"][label]:
            raise GoldenError(f"{npz_path}: sha256 of the {label} does not match the metadata")
    missing = sorted(set(family.output_axes) - set(reference))
    if missing:
        raise GoldenError(f"{npz_path}: no stored reference for outputs {missing}")
    return StoredGolden(meta=meta, inputs=inputs, reference=reference)
