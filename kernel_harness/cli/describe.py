"""``kernel-harness describe FAMILY``: the contract an implementation must meet.

Prints the implementation signature, the outputs and their axes, every tolerance
with its reason, the contract in words, capabilities, the optional features an
implementation may declare it lacks (``--without``), what the strategy draws (its
documentation and a few drawn cases), and an adapter template for ``--impl``.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import textwrap
from typing import Any

from hypothesis import HealthCheck, given, settings

from kernel_harness.cli import common
from kernel_harness.core.judges import judge_for
from kernel_harness.core.tolerance import Tolerance
from kernel_harness.records.family import Family
from kernel_harness.run import report


def add_parser(sub: Any) -> None:
    """Adds ``kernel-harness describe``."""
    describe = sub.add_parser("describe", help="a family's contract: signature, outputs, "
                              "tolerances, capabilities, what it draws, an example adapter")
    describe.add_argument("family", nargs="+", help="families to describe")
    describe.add_argument("--samples", type=int, default=4,
                          help="cases to draw as examples (0: none)")


def sample_cases(family: Family, n: int) -> list[str]:
    """``n`` cases drawn from the family's strategy (derandomized), as shape summaries."""
    drawn: list[str] = []
    if n < 1:
        return drawn

    @settings(max_examples=n, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(family.cases())
    def draw(case: Any) -> None:
        describe = getattr(case, "shape_summary", None)
        drawn.append(f"{case.dtype} {describe()}" if callable(describe) else repr(case))

    draw()
    return list(dict.fromkeys(drawn))[:n]


def _strategy_doc(family: Family) -> str:
    fn = getattr(family.cases, "func", family.cases)  # a narrowed family's partial
    doc = inspect.getdoc(fn) or ""
    if not doc and hasattr(fn, "__wrapped__"):
        doc = inspect.getdoc(fn.__wrapped__) or ""
    return doc or "(the strategy has no documentation)"


def adapter_template(family: Family) -> str:
    """A module skeleton a user fills in and passes as ``--impl``."""
    lacking = ", ".join(repr(f) for f in sorted(family.optional)[:2])
    lines = [
        f"# my_impl.py -- run with: kernel-harness check {family.name} --impl my_impl:my_kernel",
        "import kernel_harness",
        "",
    ]
    if family.optional:
        lines.append(f"@kernel_harness.without({lacking})  # only the features you lack")
    lines += [
        "def my_kernel(*args, **kwargs):",
        "    # Called exactly as the signature above says; adapt layouts and options",
        "    # to your library here and return what the signature returns.",
        "    raise NotImplementedError",
    ]
    return "\n".join(lines)


def callable_name(fn: Any) -> str:
    """``module:qualname`` of a kernel (a partial as ``module:qualname(keywords)``): the same
    text in every process, never a repr with a memory address."""
    if isinstance(fn, functools.partial):
        bound = [*map(repr, fn.args), *(f"{k}={v!r}" for k, v in fn.keywords.items())]
        return f"{callable_name(fn.func)}({', '.join(bound)}, ...)"
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', type(fn).__name__)}"


def kernels_section(family: Family) -> list[str]:
    """The Pallas kernels a real implementation launches per call, what it may compute
    outside them, and the sizes it claims (``Family.kernels``, ``Family.outside_kernel``,
    ``Family.claimed``)."""
    if family.kernels is None:
        why = family.outside_kernel.by_design or "the family's kernel is not Pallas"
        return [f"pallas kernels: not counted ({why})"]
    claimed = (family.claimed.describe() if family.claimed is not None else
               ["claimed sizes: none declared (claimed-sizes is a SKIP)"])
    computes = family.kernels.computes_lines() or [
        "nothing declared (a kernel that only copies what XLA computed is judged by the "
        "outside measure alone)"]
    return [f"pallas kernels per call: {family.kernels.describe()}",
            "inside the Pallas kernels (the op's core each pass's kernels compute into "
            "every output they reach; else 'math outside the kernel'):",
            *(f"  {line}" for line in computes),
            "outside the Pallas kernels (what the wrapper may compute in XLA on arrays of "
            "the problem's size; anything else fails as 'math outside the kernel'):",
            *(f"  {line}" for line in family.outside_kernel.describe()), *claimed]


def _reasons(t: Tolerance) -> str:
    """A tolerance's reasons: the fixed bound's, the calibrated judge's, the element bound's."""
    return " | ".join([t.reason or "-",
                       *([f"calibrated: {t.calibrated.reason}"] if t.calibrated else []),
                       *([f"per element: {t.per_element.reason}"] if t.per_element else [])])


def describe(family: Family, samples: int = 4) -> str:
    """The full description of ``family``."""
    wrap = lambda text, indent="  ": textwrap.fill(  # noqa: E731
        text, 96, initial_indent=indent, subsequent_indent=indent + "  "
    )
    out = [f"{family.name}: {family.summary}", "", "implementation signature (--impl):",
           wrap(family.impl_signature), f"  default: {callable_name(family.kernel)}", ""]
    out.append("outputs (every one compared, forward and gradients):")
    out += [f"  {name:<8} ({', '.join(axes)})" for name, axes in family.output_axes.items()]
    out += ["", "tolerances (max error relative to the output's scale; judge: 'fixed' = "
            "max_rel, globally and per slice, or 'calibrated' = at most N x the error of "
            "the same plain math in the case's dtype at the default precision + a floor, "
            "docs/judge.md \"Calibrated bounds\"; 'each element' = also each element by "
            "its own size, in ulp of the dtype, docs/judge.md \"Each element by its own "
            "size\"):"]
    rows = [[d, o, f"{t.max_rel_err:g}", judge_for(t).describe(), _reasons(t)]
            for (d, o), t in sorted(family.tolerances.entries.items())]
    out.append(textwrap.indent(report.format_table(
        ["dtype", "output", "max_rel", "judge", "reason"], rows), "  "))
    out += ["", "contract:", textwrap.indent(family.contract.strip() or "(none written)", "  ")]
    out += ["", f"capabilities: {', '.join(sorted(family.capabilities))}"]
    needs = f"none here (needs {family.requires or 'a backend'})"
    out += [f"backends: {', '.join(sorted(family.backends)) or needs}", ""]
    out += kernels_section(family) + [""]
    if family.optional:
        out.append("optional features (an implementation may lack them: --without NAME,... "
                   "or kernel_harness.without(...)):")
        out += [f"  {name:<16} {what}" for name, what in sorted(family.optional.items())]
    else:
        out.append("optional features: none declared (every case the strategy draws is "
                   "part of the contract)")
    if family.relations:
        out += ["", "the op's relations (each a property of its own name):"]
        out += [wrap(f"{r.name}: {r.doc}") for r in family.relations]
    out += ["", "what the strategy draws:", textwrap.indent(_strategy_doc(family), "  ")]
    drawn = sample_cases(family, samples)
    if drawn:
        out.append("  for example:")
        out += [f"    {c}" for c in drawn]
    out += ["", "example adapter:", textwrap.indent(adapter_template(family), "  ")]
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    """Runs ``kernel-harness describe``."""
    fams = common.families(args.family)
    print("\n\n".join(describe(f, args.samples) for f in fams))
    return 0
