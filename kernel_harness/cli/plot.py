"""Failure pictures (``repro --plot PATH.png``, ``check --plot-dir DIR``): where the error lives.

One row per failing output: (1) the error map |kernel - reference| / max|reference| over
(query or row, last axis) for the worst batch and head, log scale, with the q-block grid
drawn where the case names its blocks (``block_q``/``block_kv``); (2) the per-row maximum
relative error against the tolerance; (3) for families with a ``visible`` hook, the
[query, key] visibility of that head with the failing rows marked. matplotlib is the
optional extra ``.[plot]``; without it the commands stop with one line saying so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.core.errors import UsageError
from kernel_harness.records.family import Family
from kernel_harness.run.runner import judge_outputs, low_precision_outputs, run_on_backend

_ROW_AXES = ("query", "row", "key", "index")
_BLOCK_FIELD = {"query": "block_q", "key": "block_kv", "row": "block_rows"}


def require_matplotlib() -> Any:
    """``matplotlib.pyplot`` (Agg backend), or a one-line UsageError saying how to get it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("failure pictures need matplotlib: pip install 'kernel-harness[plot]'"
                         ) from None
    return plt


def _pick_2d(err: np.ndarray, axes: tuple[str, ...]) -> tuple[np.ndarray, list[str], str]:
    """Reduces an error array to 2-D (row axis, last axis) at the worst batch/head."""
    where = np.unravel_index(int(np.nanargmax(err)), err.shape) if err.size else ()
    index: list[Any] = []
    picked = []
    row_axis = next((a for a in axes if a in _ROW_AXES), axes[0])
    keep = {row_axis, axes[-1]}
    for i, name in enumerate(axes):
        if name in keep:
            index.append(slice(None))
        else:
            index.append(where[i])
            picked.append(f"{name}={where[i]}")
    kept = [a for a in axes if a in keep]
    sub = err[tuple(index)]
    if sub.ndim == 1:
        sub = sub[:, None]
    return sub, kept, ", ".join(picked)


def plot_case(family: Family, case: Any, backend: Backend, impl: Any, path: Path) -> Path:
    """Reruns ``case`` and writes the picture of its failing outputs to ``path``."""
    plt = require_matplotlib()
    inputs = case.materialize()
    actual = run_on_backend(family, impl or family.kernel, case, inputs, backend)
    expected = family.reference(case, inputs)
    verdicts, _ = judge_outputs(family, case, actual, expected,
                                low_precision=low_precision_outputs(family, case, inputs, backend))
    shown = [v for v in verdicts if not v.passed] or list(verdicts)
    hooks = family.metamorphic
    visible = hooks.visible(case) if hooks is not None and hooks.visible is not None else None
    cols = 3 if visible is not None else 2
    fig, grid = plt.subplots(len(shown), cols, figsize=(5 * cols, 4 * len(shown)), squeeze=False)
    for row, v in zip(grid, shown, strict=True):
        name, axes = v.stats.output, family.output_axes[v.stats.output]
        a = np.asarray(actual[name], np.float64)
        e = np.broadcast_to(np.asarray(expected[name], np.float64), a.shape)
        err = np.abs(a - e) / max(float(np.nanmax(np.abs(e))) if e.size else 1.0, 1e-30)
        err = np.where(np.isfinite(err), err, np.nan if not np.isnan(a).any() else 1.0)
        sub, kept, picked = _pick_2d(err, axes)
        tol = v.tolerance.max_rel_err
        im = row[0].imshow(np.log10(np.maximum(sub, 1e-12)), aspect="auto",
                           interpolation="nearest", cmap="magma", vmin=np.log10(tol) - 4)
        fig.colorbar(im, ax=row[0], label="log10 rel err")
        row[0].set_title(f"{name} {'FAIL' if not v.passed else 'ok'}: error map {picked}"[:70])
        row[0].set_ylabel(kept[0])
        row[0].set_xlabel(kept[-1] if len(kept) > 1 else "")
        block = getattr(case, _BLOCK_FIELD.get(kept[0], ""), None)
        for edge in range(block or sub.shape[0], sub.shape[0], block or sub.shape[0]):
            row[0].axhline(edge - 0.5, color="cyan", lw=0.8)
        per_row = np.nanmax(sub, axis=1)
        row[1].semilogy(np.maximum(per_row, 1e-12), drawstyle="steps-mid")
        row[1].axhline(tol, color="red", ls="--", label=f"tolerance {tol:g}")
        row[1].set_title(f"{name}: max rel err per {kept[0]}")
        row[1].set_xlabel(kept[0])
        row[1].legend()
        if visible is not None:
            vis = np.asarray(visible)
            b, h = 0, 0
            for item in picked.split(", "):
                if item.startswith("batch="):
                    b = min(int(item.split("=")[1]), vis.shape[0] - 1)
                if item.startswith("head="):
                    h = min(int(item.split("=")[1]), vis.shape[1] - 1)
            row[2].imshow(vis[b, h], aspect="auto", interpolation="nearest", cmap="Greys")
            bad = np.nonzero(per_row > tol)[0] if kept[0] == "query" else []
            if len(bad):
                row[2].scatter(np.zeros(len(bad)), bad, marker=">", color="red", s=8,
                               label="rows over tolerance")
                row[2].legend(loc="lower right")
            row[2].set_title(f"visible keys, black (batch={b} head={h})")
            row[2].set_xlabel("key")
            row[2].set_ylabel("query")
    fig.suptitle(f"{family.name} on {backend.name}: {case.to_json()}"[:160], fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=72)
    plt.close(fig)
    return path
