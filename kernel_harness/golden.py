"""Golden files: named regression cases stored as ``.npz`` arrays plus JSON metadata.

Layout, per family, under the golden root (``golden/`` at the repository root)::

    golden/<family>/cases.json     the manifest: named cases, their tags and why each exists
    golden/<family>/<name>.npz     inputs and reference outputs (gradients included)
    golden/<family>/<name>.json    metadata: schema, versions, backend, case, tolerances, hashes

Arrays whose dtype numpy cannot store without pickle (bfloat16 and other
ml_dtypes) are stored losslessly as an unsigned-integer view; the metadata
names the real dtype. Files are loaded with ``allow_pickle=False`` and their
sha256 checked; anything corrupt, missing or inconsistent is a
:class:`GoldenError` that names the file.

``check`` runs the kernel on the STORED inputs and compares it with the
STORED reference outputs under the family's tolerances, and also compares a
fresh reference run with the stored one (reference drift). A golden recorded
on another backend, device or jax version is reported as not comparable and
skipped, never compared quietly.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import zipfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from kernel_harness.backends import Backend
from kernel_harness.compare import compare
from kernel_harness.family import Arrays, Family
from kernel_harness.runner import ensure_supported, impl_name, judge_outputs, run_on_backend
from kernel_harness.tolerance import Tolerance, Verdict, judge

SCHEMA_VERSION = 1
MANIFEST = "cases.json"

#: The stored and the fresh reference run the same plain-jnp code in float32 at HIGHEST
#: precision on the same backend and jax version; anything above this (relative to the
#: output's scale) means the reference itself changed.
REFERENCE_DRIFT_TOL = Tolerance(
    max_rel_err=1e-5, reason="same reference code, same jax and backend: only rounding noise"
)

_INPUT, _REF = "input.", "reference."


class GoldenError(Exception):
    """A golden file is missing, corrupt, or does not match its metadata or manifest."""


def default_root() -> Path:
    """``$KERNEL_HARNESS_GOLDEN_DIR``, else ``golden/`` next to the package (a source
    checkout), else ``./golden``."""
    env = os.environ.get("KERNEL_HARNESS_GOLDEN_DIR")
    if env:
        return Path(env)
    beside = Path(__file__).resolve().parent.parent / "golden"
    return beside if beside.is_dir() else Path("golden")


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
    """The folder holding one family's golden files."""
    return (root or default_root()) / family_name


def load_manifest(family: Family, root: Path | None = None) -> list[GoldenCase]:
    """The named cases of ``family``; a missing or malformed manifest is a GoldenError."""
    path = family_dir(family.name, root) / MANIFEST
    if not path.is_file():
        raise GoldenError(
            f"{family.name}: no golden manifest {path}; pin cases with "
            f"`kernel-harness golden add {family.name} NAME --case JSON`"
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
    path = family_dir(family.name, root) / MANIFEST
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


#: Environment fields that must agree for stored numbers to be comparable.
COMPARABLE_FIELDS = ("backend", "device_kind", "jax_version", "jaxlib_version")


def not_comparable_reason(recorded: dict[str, str], current: dict[str, str]) -> str | None:
    """``None`` if results recorded in ``recorded`` can be compared here, else why not."""
    diffs = [k for k in COMPARABLE_FIELDS if recorded.get(k) != current.get(k)]
    if not diffs:
        return None
    was = ", ".join(f"{k}={recorded.get(k)}" for k in diffs)
    now = ", ".join(f"{k}={current.get(k)}" for k in diffs)
    return f"not comparable: recorded on {was}; this run has {now}"


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
    npz_path, json_path = paths(family.name, gcase.name, root)
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
    if meta.get("case") != json.loads(gcase.case.to_json()):
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


# ---------------------------------------------------------------- record and check


@dataclasses.dataclass(frozen=True, kw_only=True)
class GoldenOutcome:
    """What recording or checking one golden case gave.

    ``status`` is ``PASS``, ``FAIL`` (kernel or reference outside tolerance),
    ``SKIP`` (not comparable here; ``detail`` says why), ``ERROR`` (missing or
    corrupt file, crash) or ``RECORDED`` / ``KEPT`` for ``record``.
    """

    family: str
    name: str
    status: str
    detail: str = ""
    kernel: tuple[Verdict, ...] = ()
    drift: tuple[Verdict, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status in ("PASS", "SKIP", "RECORDED", "KEPT")


def _max_rel(verdicts: Sequence[Verdict]) -> dict[str, float]:
    return {v.stats.output: float(v.stats.max_rel_err) for v in verdicts}


def record_case(
    family: Family, gcase: GoldenCase, backend: Backend, *,
    impl: Callable[..., Any] | None = None, root: Path | None = None, force: bool = False,
) -> GoldenOutcome:
    """Records one golden case: inputs, reference outputs and metadata.

    Existing files are kept unless ``force``. The kernel runs too and must pass
    (a golden of a failing kernel would pin the wrong thing).
    """
    npz_path, json_path = paths(family.name, gcase.name, root)
    if not force and npz_path.exists() and json_path.exists():
        return GoldenOutcome(family=family.name, name=gcase.name, status="KEPT",
                             detail="exists (use --force to regenerate)")
    impl = family.kernel if impl is None else impl
    inputs = gcase.case.materialize()
    reference = {k: np.asarray(v) for k, v in family.reference(gcase.case, inputs).items()}
    actual = run_on_backend(family, impl, gcase.case, inputs, backend)
    verdicts, _ = judge_outputs(family, gcase.case, actual, reference)
    if not all(v.passed for v in verdicts):
        bad = ", ".join(f"{v.stats.output}: {'; '.join(v.problems)}" for v in verdicts
                        if not v.passed)
        return GoldenOutcome(family=family.name, name=gcase.name, status="ERROR",
                             detail=f"not recorded: the kernel fails this case ({bad})",
                             kernel=verdicts)
    reference = {k: v for k, v in reference.items() if k in family.output_axes}
    write_golden(family, gcase, inputs, reference, backend=backend,
                 kernel_stats=_max_rel(verdicts), impl=impl_name(impl), root=root)
    return GoldenOutcome(family=family.name, name=gcase.name, status="RECORDED",
                         detail=f"{npz_path} ({npz_path.stat().st_size // 1024} KiB)",
                         kernel=verdicts)


def check_golden(
    family: Family, gcase: GoldenCase, backend: Backend, *,
    impl: Callable[..., Any] | None = None, root: Path | None = None,
    across_versions: bool = False,
) -> GoldenOutcome:
    """Checks one golden case: fresh kernel vs stored reference, fresh vs stored reference."""
    base = {"family": family.name, "name": gcase.name}
    try:
        stored = load_golden(family, gcase, root)
    except GoldenError as e:
        return GoldenOutcome(**base, status="ERROR", detail=str(e))
    notes = []
    reason = not_comparable_reason(stored.meta["environment"], environment(backend))
    if reason is not None:
        if not across_versions:
            return GoldenOutcome(**base, status="SKIP", detail=reason)
        notes.append(f"compared anyway (--across-versions); {reason}")
    if arrays_sha256(gcase.case.materialize()) != stored.meta["sha256"]["inputs"]:
        notes.append("case.materialize() no longer gives the stored inputs; stored ones used")
    impl = family.kernel if impl is None else impl
    case = gcase.case
    actual = run_on_backend(family, impl, case, stored.inputs, backend)
    kernel, _ = judge_outputs(family, case, actual, stored.reference)
    fresh = family.reference(case, stored.inputs)
    valid = family.valid(case)
    drift = tuple(
        judge(compare(fresh[o], stored.reference[o], output=o, axes=axes, valid=valid.get(o),
                      mismatch_threshold_rel=REFERENCE_DRIFT_TOL.max_rel_err),
              REFERENCE_DRIFT_TOL)
        for o, axes in family.output_axes.items()
    )
    problems = [f"kernel {v.stats.output}: {'; '.join(v.problems)}" for v in kernel
                if not v.passed]
    problems += [f"reference drift {v.stats.output}: {'; '.join(v.problems)}" for v in drift
                 if not v.passed]
    return GoldenOutcome(**base, status="FAIL" if problems else "PASS",
                         detail="; ".join(problems), kernel=kernel, drift=drift,
                         notes=tuple(notes))


def orphans(family: Family, cases: Sequence[GoldenCase], root: Path | None = None) -> list[Path]:
    """Golden files in the family's folder that no manifest case names."""
    d = family_dir(family.name, root)
    if not d.is_dir():
        return []
    known = {f"{c.name}{ext}" for c in cases for ext in (".npz", ".json")}
    known |= {MANIFEST, "baseline.json"}
    return sorted(p for p in d.iterdir() if p.is_file() and p.name not in known)


def _guard(family: Family, gcase: GoldenCase, fn: Callable[[], GoldenOutcome]) -> GoldenOutcome:
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - a crash is reported per case, not hidden
        return GoldenOutcome(family=family.name, name=gcase.name, status="ERROR",
                             detail=f"{type(e).__name__}: {e}")


def run_family(
    family: Family, backend: Backend, *, mode: str, names: Sequence[str] = (),
    tags: Sequence[str] = (), impl: Callable[..., Any] | None = None,
    root: Path | None = None, force: bool = False, across_versions: bool = False,
) -> list[GoldenOutcome]:
    """``mode="record"`` or ``"check"`` over a family's selected golden cases.

    A missing manifest, a failing case and a stray file (``check`` only) are
    ERROR outcomes; a family that cannot run on ``backend`` is one SKIP.
    """
    if mode not in ("record", "check"):
        raise ValueError(f"mode must be 'record' or 'check', got {mode!r}")
    try:
        ensure_supported(family, backend)
    except Exception as e:  # noqa: BLE001 - BackendUnavailable, reported as a skip
        return [GoldenOutcome(family=family.name, name="*", status="SKIP", detail=str(e))]
    try:
        cases = load_manifest(family, root)
        chosen = select(cases, names=names, tags=tags)
    except GoldenError as e:
        return [GoldenOutcome(family=family.name, name="*", status="ERROR", detail=str(e))]
    outcomes = []
    for gcase in chosen:
        if mode == "record":
            outcomes.append(_guard(family, gcase, lambda g=gcase: record_case(
                family, g, backend, impl=impl, root=root, force=force)))
        else:
            outcomes.append(_guard(family, gcase, lambda g=gcase: check_golden(
                family, g, backend, impl=impl, root=root, across_versions=across_versions)))
    if mode == "check" and not names and not tags:
        outcomes += [
            GoldenOutcome(family=family.name, name=p.name, status="ERROR",
                          detail=f"stray file {p}: no manifest case names it")
            for p in orphans(family, cases, root)
        ]
    return outcomes


def summary_rows(outcomes: Sequence[GoldenOutcome]) -> list[list[str]]:
    """Rows for ``report.format_table``: family, case, status, worst kernel error, detail."""
    rows = []
    for o in outcomes:
        worst = max(o.kernel, key=lambda v: v.stats.max_rel_err / v.tolerance.max_rel_err,
                    default=None)
        kernel = (f"{worst.stats.output} {worst.stats.max_rel_err:.2g}/"
                  f"{worst.tolerance.max_rel_err:.2g}" if worst else "-")
        drift = f"{max(v.stats.max_rel_err for v in o.drift):.1g}" if o.drift else "-"
        detail = "; ".join(filter(None, [o.detail, *o.notes]))
        rows.append([o.family, o.name, o.status, kernel, drift, detail])
    return rows


SUMMARY_HEADERS = ["family", "case", "status", "kernel err/tol (worst)", "ref drift", "detail"]


# ---------------------------------------------------------------- command line


def add_cli(sub: Any) -> None:
    """Adds ``golden record|check|add`` to the ``kernel-harness`` subparsers."""
    golden = sub.add_parser("golden", help="record or check stored regression cases")
    gsub = golden.add_subparsers(dest="golden_command", required=True)
    for name, text in (("record", "write golden files (missing ones; --force: all chosen)"),
                       ("check", "compare the kernel and reference with the stored goldens")):
        p = gsub.add_parser(name, help=text)
        p.add_argument("family", nargs="*", help="families (default: all)")
        p.add_argument("--case", action="append", default=[], help="only these named cases")
        p.add_argument("--tag", action="append", default=[], help="only cases with a tag")
        p.add_argument("--backend", default="interpret")
        p.add_argument("--golden-dir", type=Path, default=None)
        if name == "record":
            p.add_argument("--force", action="store_true", help="overwrite existing files")
        else:
            p.add_argument("--impl", default=None, help="MODULE:ATTR replacing the kernel")
            p.add_argument("--across-versions", action="store_true",
                           help="compare goldens recorded on another backend or jax version")
    add = gsub.add_parser("add", help="pin a case (e.g. one a failure printed) as a golden")
    add.add_argument("family")
    add.add_argument("name")
    add.add_argument("--case", required=True, help="the case as one JSON line")
    add.add_argument("--tag", action="append", default=[])
    add.add_argument("--why", default="", help="which path or bug this case pins")
    add.add_argument("--backend", default="interpret")
    add.add_argument("--golden-dir", type=Path, default=None)


def cmd_golden(args: Any) -> int:
    """Runs ``kernel-harness golden ...``; exit 0 only if every outcome is ok."""
    from kernel_harness import cli, report

    backend = cli._backend(args.backend)
    root = args.golden_dir
    if args.golden_command == "add":
        (family,) = cli._families([args.family])
        try:
            case = family.case_type.from_json(args.case)
            gcase = GoldenCase(name=args.name, case=case, tags=tuple(args.tag), why=args.why)
        except ValueError as e:
            raise cli.UsageError(f"golden add: {e}") from None
        try:
            cases = load_manifest(family, root)
        except GoldenError:
            if (family_dir(family.name, root) / MANIFEST).exists():
                raise
            cases = []
        if any(c.name == args.name for c in cases):
            raise cli.UsageError(f"golden add: {family.name} already has a case {args.name!r}")
        outcome = _guard(family, gcase, lambda: record_case(family, gcase, backend, root=root,
                                                            force=True))
        if outcome.ok:
            save_manifest(family, [*cases, gcase], root)
        outcomes = [outcome]
    else:
        families = cli._families(args.family)
        impl = cli.load_impl(args.impl) if getattr(args, "impl", None) else None
        if impl is not None and len(families) != 1:
            raise cli.UsageError("--impl replaces one family's kernel: name exactly one family")
        outcomes = []
        for family in families:
            outcomes += run_family(
                family, backend, mode=args.golden_command, names=args.case, tags=args.tag,
                impl=impl, root=root, force=getattr(args, "force", False),
                across_versions=getattr(args, "across_versions", False),
            )
    print(report.format_table(SUMMARY_HEADERS, summary_rows(outcomes)))
    counts = {s: sum(o.status == s for o in outcomes) for s in
              ("PASS", "FAIL", "ERROR", "SKIP", "RECORDED", "KEPT")}
    ok = all(o.ok for o in outcomes)
    print(f"\n{'PASS' if ok else 'FAIL'}: golden {args.golden_command} on backend {backend.name}: "
          + ", ".join(f"{v} {k.lower()}" for k, v in counts.items() if v))
    return 0 if ok else 1
