"""Rehearses a workflow's own commands here, so a broken recipe fails CI, not the night.

Reads ``.github/workflows/nightly-tpu.yml`` (or ``--workflow``) and runs, job by job (in
the order of ``needs``) and matrix entry by matrix entry, every ``run`` step that calls
``kernel-harness``, with the text of the workflow: only ``${{ matrix.* }}`` is filled in (as
GitHub Actions does) and the workflow's ``KH_*`` variables are overridden (``KH_BACKEND``:
``interpret``, a small ``KH_PROFILE``, ``KH_CHECK_FLAGS`` bounding the examples). Install
and ``uses:`` steps are left out: the project is already installed in ``.venv``. The matrix
may be narrowed (``--families SHARD=FAMILY,...``) so the rehearsal stays short; the commands
stay the workflow's. Steps run with ``bash -e`` (GitHub's default shell for ``run``) in a
scratch folder holding a ``.venv`` link to this checkout's, so ``results/`` lands there; a
step after a failed one is skipped unless it says ``if: always()``, and a job with
``if: always()`` runs after a failed one it needs, as on GitHub.

Exit 0 only if every rehearsed step ran and exited 0; a workflow variable this rehearsal
does not override, or a ``${{ }}`` expression it cannot fill in, is an error (exit 2).
Usage: ``.venv/bin/python .ci/rehearse_nightly.py [--families 1=hstu --families 2=tpu-paged]``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")
#: What the rehearsal sets instead of the workflow's KH_* variables.
OVERRIDES = {"KH_BACKEND": "interpret", "KH_PROFILE": "ci",
             "KH_CHECK_FLAGS": "--max-examples 1 --seed 1",
             # A directory corpus in the scratch folder: the recipe's --corpus path runs
             # (replaying an empty corpus: the ci profile reads only).
             "KH_CORPUS": "corpus"}


class RecipeError(Exception):
    """The workflow cannot be rehearsed as written (the message says why)."""


def job_order(jobs: dict[str, Any]) -> list[str]:
    """Job names with every job after the jobs it ``needs``."""
    done: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in done:
            return
        if name in path:
            raise RecipeError(f"jobs need each other in a cycle: {' -> '.join(path + (name,))}")
        needs = jobs[name].get("needs", [])
        for need in [needs] if isinstance(needs, str) else needs:
            visit(need, path + (name,))
        done.append(name)

    for name in jobs:
        visit(name, ())
    return done


def matrix_entries(job: dict[str, Any], families: dict[str, str]) -> list[dict[str, str]]:
    """The job's matrix entries (``include`` only; ``[{}]`` without a matrix), with the
    families of a shard replaced where ``families`` names it; a key that some entries set
    and others do not is empty in the others (GitHub renders it so)."""
    matrix = job.get("strategy", {}).get("matrix")
    if not matrix:
        return [{}]
    if set(matrix) != {"include"}:
        raise RecipeError("only `matrix: include:` lists are rehearsed")
    keys = {k for e in matrix["include"] for k in e}
    entries = [{**dict.fromkeys(keys, ""), **{k: str(v) for k, v in e.items()}}
               for e in matrix["include"]]
    unknown = set(families) - {e.get("shard") for e in entries}
    if unknown:
        raise RecipeError(f"--families names shards the matrix lacks: {sorted(unknown)}")
    return [{**e, "families": families.get(e.get("shard", ""), e.get("families", ""))}
            for e in entries]


def fill(script: str, entry: dict[str, str]) -> str:
    """``${{ matrix.X }}`` filled in from ``entry``; any other expression is a RecipeError."""
    def one(m: re.Match[str]) -> str:
        key = m.group(1)
        if key.startswith("matrix.") and key[len("matrix."):] in entry:
            return entry[key[len("matrix."):]]
        raise RecipeError(f"cannot fill in ${{{{ {key} }}}} in: {script.strip()[:120]}")
    return EXPRESSION.sub(one, script)


def environment(doc: dict[str, Any], job: dict[str, Any], step: dict[str, Any]) -> dict[str, str]:
    """The process environment, the workflow's, job's and step's ``env``, the overrides."""
    declared = {**doc.get("env", {}), **job.get("env", {}), **step.get("env", {})}
    missing = sorted(k for k in declared if k.startswith("KH_") and k not in OVERRIDES)
    if missing:
        raise RecipeError(f"the workflow sets {missing}, which the rehearsal does not override")
    return {**os.environ, **{k: str(v) for k, v in declared.items()}, **OVERRIDES}


def rehearse(workflow: Path, families: dict[str, str], scratch: Path) -> list[list[str]]:
    """Runs the steps; returns one row per step: job, entry, step, status, seconds."""
    doc = yaml.safe_load(workflow.read_text())
    (scratch / ".venv").symlink_to(ROOT / ".venv")
    (scratch / OVERRIDES["KH_CORPUS"]).mkdir()  # read by the rehearsal's ci profile
    rows: list[list[str]] = []
    failed_jobs: set[str] = set()
    for name in job_order(doc["jobs"]):
        job = doc["jobs"][name]
        needs = job.get("needs", [])
        needs = [needs] if isinstance(needs, str) else needs
        if failed_jobs & set(needs) and "always()" not in str(job.get("if", "")):
            rows.append([name, "-", "-", "SKIP (a job it needs failed)", "-"])
            failed_jobs.add(name)
            continue
        for entry in matrix_entries(job, families):
            label = ",".join(f"{k}={v}" for k, v in entry.items()) or "-"
            failed = False
            for step in job["steps"]:
                script = step.get("run", "")
                if "kernel-harness" not in script:
                    continue
                title = step.get("name", script.split("\n")[0][:40])
                if failed and "always()" not in str(step.get("if", "")):
                    rows.append([name, label, title, "SKIP (an earlier step failed)", "-"])
                    continue
                text = fill(script, entry)
                print(f"\n$ {text.strip()}", flush=True)
                start = time.monotonic()
                rc = subprocess.run(["bash", "-e", "-c", text], cwd=scratch,
                                    env=environment(doc, job, step)).returncode
                seconds = f"{time.monotonic() - start:.0f}"
                rows.append([name, label, title, "ok" if rc == 0 else f"FAIL (exit {rc})",
                             seconds])
                failed = failed or rc != 0
            if failed:
                failed_jobs.add(name)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Rehearses the workflow and prints one row per step; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workflow", type=Path,
                        default=ROOT / ".github" / "workflows" / "nightly-tpu.yml")
    parser.add_argument("--families", action="append", default=[], metavar="SHARD=F,F",
                        help="run these families in matrix shard SHARD (default: the matrix's)")
    parser.add_argument("--backend", default=OVERRIDES["KH_BACKEND"],
                        help="KH_BACKEND for the rehearsal (tpu-interpret: the TPU families "
                        "simulated, and the goldens recorded on interpret checked across)")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="run in DIR (kept) instead of a scratch folder")
    args = parser.parse_args(argv)
    try:
        families = dict(f.split("=", 1) for f in args.families)
    except ValueError:
        print(f"rehearse: --families takes SHARD=FAMILY,..., got {args.families}",
              file=sys.stderr)
        return 2
    families = {k: v.replace(",", " ") for k, v in families.items()}
    OVERRIDES["KH_BACKEND"] = args.backend
    print(f"rehearsing {args.workflow.relative_to(ROOT)} with "
          + " ".join(f"{k}={v!r}" for k, v in OVERRIDES.items()))
    with tempfile.TemporaryDirectory(prefix="rehearse-nightly-") as tmp:
        scratch = args.keep or Path(tmp)
        scratch.mkdir(parents=True, exist_ok=True)
        try:
            rows = rehearse(args.workflow, families, scratch)
        except RecipeError as e:
            print(f"rehearse: {e}", file=sys.stderr)
            return 2
    print("\njob      entry / step / status / seconds")
    for row in rows:
        print("  " + " | ".join(row))
    ok = bool(rows) and all(r[3] == "ok" for r in rows)
    print(f"\n{'PASS' if ok else 'FAIL'}: {sum(r[3] == 'ok' for r in rows)}/{len(rows)} "
          "rehearsed steps exited 0")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
