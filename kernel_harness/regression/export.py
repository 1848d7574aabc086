"""Standalone repro scripts: one case of one family, runnable without kernel_harness.

:func:`export_repro` writes ``PATH.py`` and ``PATH.npz`` (the exact inputs and the
masks of elements inside the kernel's contract). The script imports only jax, numpy
and the kernel's own package, calls the kernel with the case's exact static options
on the named backend, computes the family's reference for that case, its op's source
embedded verbatim (:class:`~kernel_harness.records.export.ExportSnippet`), prints
versions, per-output errors and the worst location, and exits 1 when an output is
outside its tolerance (NaN included) or compares no element, 2 when the kernel raises, 0 otherwise.
"""

from __future__ import annotations

import dataclasses
import inspect
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from kernel_harness.core import compare as _judge_module
from kernel_harness.core import elements as _elements_module
from kernel_harness.core.compare import slice_layout
from kernel_harness.records.family import Family
from kernel_harness.records.outputs import judged_outputs

#: Backends a script can name: the Pallas interpreter on CPU, or compiled on a device.
EXPORT_BACKENDS: dict[str, bool] = {"interpret": True, "gpu": False, "tpu": False}


class ExportError(ValueError):
    """The case cannot be exported (family without an export hook, unknown backend...)."""


def build_case(fam: Family, case_json: str, *, outside_contract: bool = False) -> Any:
    """The family's case from JSON. ``outside_contract`` skips the case's validity
    checks (for findings: configurations the strategy never draws because the kernel is
    known to mishandle them); missing fields take their defaults."""
    if not outside_contract:
        return fam.case_type.from_json(case_json)
    try:
        data = fam.case_type.fields_from_json(case_json)
    except ValueError as e:
        raise ExportError(str(e)) from None
    case = object.__new__(fam.case_type)
    for f in dataclasses.fields(fam.case_type):
        if f.name in data:
            value = data[f.name]
        elif f.default is not dataclasses.MISSING:
            value = f.default
        else:
            raise ExportError(f"{fam.case_type.__name__}: field {f.name!r} is required")
        object.__setattr__(case, f.name, value)
    return case


def _impl_import(impl_spec: str) -> str:
    module, sep, attr = impl_spec.partition(":")
    if not sep or not module or not attr.isidentifier():
        raise ExportError(f"--impl must be MODULE:ATTR, got {impl_spec!r}")
    top = module.partition(".")[0]
    return (f"# --impl {impl_spec}: run this script where `import {module}` works (from the\n"
            f"# directory that holds {top}/ or {top}.py, with it on PYTHONPATH, or installed).\n"
            f"try:\n"
            f"    from {module} import {attr} as kernel\n"
            f"except ImportError as _e:  # no kernel here: a setup error (2), not a FAIL (1)\n"
            f"    print(f\"cannot import {module} (--impl {impl_spec}): {{_e}}; "
            f"run this script from the directory that holds {top}, or add that directory to "
            f"PYTHONPATH\", file=sys.stderr)\n"
            f"    raise SystemExit(2) from None")


def _npz_arrays(fam: Family, case: Any, extra: Any) -> dict[str, np.ndarray]:
    """Inputs (ml_dtypes' dtypes, bfloat16 and the float8 ones, stored as an unsigned view
    of their width with a ``dtype:`` entry the script reads back) and ``valid:<output>``
    masks."""
    arrays: dict[str, np.ndarray] = {}
    for name, a in case.materialize().items():
        a = np.asarray(a)
        if a.dtype.kind == "V" and a.dtype.names is None:  # an ml_dtypes scalar type
            arrays[name] = a.view(np.dtype(f"u{a.dtype.itemsize}"))
            arrays[f"dtype:{name}"] = np.asarray(a.dtype.name)
        else:
            arrays[name] = a
    for out in judged_outputs(fam, case, same_as=False, compared_only=False):
        if out.valid is not None:
            arrays[f"valid:{out.name}"] = np.asarray(out.valid, bool)
    arrays.update({name: np.asarray(a) for name, a in extra.items()})
    return arrays


_HEADER = '''\
#!/usr/bin/env python3
"""{family} on {backend}: standalone repro exported by `kernel-harness export-repro`.

Needs only jax, numpy and the kernel's package (not the harness). Inputs: {npz}.
Exit 0: every output within tolerance of the float32 HIGHEST-precision reference
below; 1: an output is outside it (NaN counts as outside) or none of its elements is
compared; 2: the kernel raised.
case: {case_json}
"""
import os
import platform
import sys
from importlib.metadata import version
{platform_line}
import jax
import jax.numpy as jnp
import numpy as np

{kernel_import}

HI = jax.lax.Precision.HIGHEST
INTERPRET = {interpret}
# The harness's fixed judge, per output ({dtype}), from the family's table: max |kernel -
# reference| / max |reference| at most TOL, and each element's error against its own
# slice's largest reference magnitude (SLICE_AXES index the slices; FLOOR: the fraction of
# the global scale under which a slice's own is not taken) at most the same TOL. The code
# that measures and decides is the harness's own, embedded below verbatim.
TOL = {tol}
AXES = {axes}
SLICE_AXES = {slice_axes}
FLOOR = {floor}
# Outputs whose reference may be non-finite inside the contract (compared by position).
NONFINITE_OK = {nonfinite_ok}
# Outputs kernel-harness judges with its calibrated bound instead (the kernel's error at most
# a multiple of the same plain-jnp math's error in {dtype}); this script applies the fixed
# table above to them, which is a different (usually looser) bound.
CALIBRATED = {calibrated}
# Outputs each of whose elements is also judged by its own size (ElementBound; calibrated:
# the harness adds the low-precision twin's error there, so this script only prints it).
ELEMENTS = {elements}
DTYPE = {dtype!r}


def load_inputs():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), {npz!r})
    with np.load(path, allow_pickle=False) as data:
        raw = {{k: data[k] for k in data.files}}
    x = {{k: v for k, v in raw.items() if ":" not in k}}
    for k in list(x):
        if f"dtype:{{k}}" in raw:
            x[k] = x[k].view(getattr(jnp, str(raw[f"dtype:{{k}}"])))
    valid = {{k[6:]: v for k, v in raw.items() if k.startswith("valid:")}}
    return x, valid
'''

_MAIN = '''

def judge_output(name, got, want, valid):
    """The harness's fixed verdict on one output: (stats, problems)."""
    stats = compare(
        np.asarray(got[name], np.float32), np.asarray(want[name], np.float32), output=name,
        axes=AXES[name], valid=valid.get(name), mismatch_threshold_rel=TOL[name],
        slice_axes=SLICE_AXES[name], slice_floor=FLOOR[name],
        magnitude=want.get(f"{name}:magnitude"))
    problems = contract_problems(stats, nonfinite_reference_ok=name in NONFINITE_OK)
    problems += bound_problems(stats, TOL[name])
    if name in ELEMENTS:
        bound = ElementBound(**{**ELEMENTS[name], "calibrated": False})
        e = measure_elements(
            np.asarray(got[name], np.float32), np.asarray(want[name], np.float32), output=name,
            axes=AXES[name], dtype=DTYPE, valid=valid.get(name), bound=bound,
            slice_axes=SLICE_AXES[name], slice_floor=FLOOR[name])
        if not e.passed:
            (print if ELEMENTS[name]["calibrated"] else problems.append)(e.problem())
    return stats, problems


def main():
    print(f"python {platform.python_version()}  jax {jax.__version__}  "
          f"jaxlib {version('jaxlib')}  numpy {np.__version__}  "
          f"backend {jax.default_backend()}  interpret={INTERPRET}")
    x, valid = load_inputs()
    got, want = run_kernel(x), reference(x)
    failed = False
    for name, tol in TOL.items():
        s, problems = judge_output(name, got, want, valid)
        failed |= bool(problems)
        print(f"{'FAIL' if problems else 'ok  '} {name:<6} max rel err {s.max_rel_err:.3g}, in "
              f"its own slice {s.slice_rel_err:.3g} (tol {tol:g}) non-finite "
              f"{s.non_finite_actual} compared {s.compared}  worst at {s.worst_location}: "
              f"{s.worst_actual:.6g} vs {s.worst_expected:.6g}"
              + ("  [kernel-harness: calibrated judge]" if name in CALIBRATED else ""))
        for problem in problems:
            print(f"       {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        status = main()
    except Exception:  # the kernel (or this script) raised: neither within nor outside
        import traceback
        traceback.print_exc()
        status = 2
    sys.exit(status)
'''


def render_script(fam: Family, case: Any, *, backend: str, impl_spec: str | None,
                  npz_name: str) -> str:
    """The source text of the standalone script for ``case``."""
    if fam.export is None:
        raise ExportError(f"family {fam.name!r} has no export hook (Family.export)")
    if backend not in EXPORT_BACKENDS:
        raise ExportError(f"export-repro backends are {sorted(EXPORT_BACKENDS)}, got {backend!r}")
    if backend not in fam.backends:
        why = f" (none here: needs {fam.requires})" if fam.requires and not fam.backends else ""
        raise ExportError(f"family {fam.name!r} does not run on backend {backend!r}{why}")
    snippet = fam.export(case)
    records = {o.name: o for o in judged_outputs(fam, case, same_as=False,
                                                   compared_only=False)}
    outs = [records[o] for o in snippet.outputs]
    tol = {o.name: o.tolerance.max_rel_err for o in outs}
    axes = {o.name: o.axes for o in outs}
    slice_axes = {o.name: slice_layout(o.name, o.axes, o.slice_axes)[0] for o in outs}
    floor = {o.name: o.tolerance.slice_floor.fraction for o in outs}
    nonfinite_ok = sorted(o.name for o in outs if o.nonfinite_reference_ok)
    calibrated = sorted(o.name for o in outs if o.tolerance.calibrated is not None)
    elements = {o.name: dataclasses.asdict(o.tolerance.per_element) for o in outs
                if o.tolerance.per_element is not None}
    interpret = EXPORT_BACKENDS[backend]
    platform_line = ""
    if interpret and snippet.platform:
        platform_line = f'os.environ.setdefault("JAX_PLATFORMS", "{snippet.platform}")'
    header = _HEADER.format(
        family=fam.name, backend=backend, npz=npz_name, case_json=case.to_json(),
        platform_line=platform_line,
        kernel_import=_impl_import(impl_spec) if impl_spec else snippet.default_import.strip(),
        interpret=interpret, dtype=case.dtype, tol=repr(tol), axes=repr(axes),
        slice_axes=repr(slice_axes), floor=repr(floor), nonfinite_ok=repr(nonfinite_ok),
        calibrated=repr(calibrated), elements=repr(elements),
    )
    body = "\n\n".join(textwrap.dedent(s).strip() for s in (snippet.run_kernel, snippet.reference))
    return header + "\n\n" + judge_source() + "\n\n" + body + "\n" + _MAIN


def judge_source() -> str:
    """The harness's own measure and fixed verdict (:mod:`kernel_harness.core.compare`,
    standalone: numpy only) as embedded in a script: its source verbatim, less its
    ``__future__`` import (a script's annotations are evaluated: a dataclass of a script
    loaded by file path, outside sys.modules, cannot resolve string annotations)."""
    source = inspect.getsource(_judge_module)
    future = "from __future__ import annotations\n"
    if future not in source:
        raise ExportError("kernel_harness/core/compare.py lost its __future__ import")
    banner = "# ---- kernel_harness/core/compare.py, embedded verbatim: the harness's judge ----"
    text = banner + "\n" + source.replace(future, "", 1).strip() + "\n# ---- end ----"
    # elements.py, less its imports of compare's names (defined just above in the script)
    elements = inspect.getsource(_elements_module)
    reuse = "from kernel_harness.core.compare import TINY_SCALE, slice_layout\n"
    if future not in elements or reuse not in elements:
        raise ExportError("kernel_harness/core/elements.py changed its imports: update "
                          "judge_source")
    elements = elements.replace(future, "", 1).replace(reuse, "", 1).strip()
    return (text + "\n\n# ---- kernel_harness/core/elements.py, embedded verbatim but its "
            "import of the names above ----\n" + elements + "\n# ---- end ----")


def export_repro(fam: Family, case: Any, out: str | Path, *, backend: str = "interpret",
                 impl_spec: str | None = None) -> tuple[Path, Path]:
    """Writes ``out`` (a .py script) and the .npz of inputs next to it; returns both paths."""
    script = Path(out)
    if script.suffix != ".py":
        raise ExportError(f"--out must name a .py file, got {str(out)!r}")
    npz = script.with_suffix(".npz")
    text = render_script(fam, case, backend=backend, impl_spec=impl_spec, npz_name=npz.name)
    script.parent.mkdir(parents=True, exist_ok=True)
    extra = fam.export(case).arrays if fam.export else {}
    np.savez_compressed(npz, **_npz_arrays(fam, case, extra))
    script.write_text(text)
    return script, npz
