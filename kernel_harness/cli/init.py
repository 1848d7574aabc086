"""``kernel-harness init NAME --kernel MODULE:FUNC [--op KIND]``: a family package
skeleton here.

Writes, in the working directory (never over an existing file: exit 2), a family
package of one kind of op (``--op``: :data:`~kernel_harness.records.scaffold.OPS`) that
passes ``kernel-harness check NAME`` as written with a placeholder kernel (see
:mod:`kernel_harness.records.scaffold`), and prints what it wrote and what to do next.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kernel_harness.records.scaffold import OPS, TODO, plan, write

#: What ``init`` prints of each kind's kernel: (placeholder, yours).
_KERNEL_NOTES = {
    "rowwise": ("{k} is a placeholder Pallas kernel (y = 2 * x + 1) and the reference its "
                "math, so the check passes as written. Replace both with yours.",
                "{k} is your kernel; the reference is a placeholder (y = 2 * x + 1), so the "
                "check fails until reference.py, cases.py and family.run are yours."),
    "delta-rule": ("{k} is a placeholder Pallas kernel of the delta rule (float32, forward "
                   "only) and the op gives the reference, so the check passes as written. "
                   "Replace it with yours.",
                   "{k} is your kernel, called in the op's layout (as the placeholder is); the "
                   "check fails until family.traceable maps the op's layout to your kernel's."),
}


def add_parser(sub: Any) -> None:
    """Adds ``init`` to the ``kernel-harness`` subparsers."""
    kinds = "\n".join(f"  {kind:<11} {line}" for kind, line in OPS.items())
    p = sub.add_parser("init", help="write a family package skeleton for your kernel here",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog=f"kinds of op (--op):\n{kinds}")
    p.add_argument("name", help="the family's name (e.g. my-softmax)")
    p.add_argument("--kernel", required=True, metavar="MODULE:FUNC",
                   help="your kernel's function; a module that does not exist yet gets a "
                   "placeholder Pallas kernel")
    p.add_argument("--op", default="rowwise", metavar="KIND",
                   help="the kind of op the skeleton is for (the kinds below; default rowwise)")


def run(args: Any) -> int:
    """Runs ``kernel-harness init``: 0 written, 2 refused (bad name, unknown --op, existing
    files)."""
    target = Path.cwd()
    skeleton = plan(args.name, args.kernel, target, op=args.op)
    written = write(skeleton, target)
    print(f"kernel-harness init: wrote the family {skeleton.name} in {target}:")
    for path in written:
        print(f"  {path.relative_to(target)}")
    placeholder, yours = _KERNEL_NOTES[args.op]
    note = placeholder if skeleton.placeholder_kernel else yours
    print("\n" + note.format(k=args.kernel))
    top = skeleton.kernel.partition(":")[0].split(".")[0]
    if skeleton.ships_kernel:
        print(f"{top} is in this folder: pyproject.toml ships it with the family, so an "
              f"installed family imports it (pip install .).")
    else:
        print(f"{top} is imported from {skeleton.kernel_origin}, not this folder: add the "
              f"distribution that provides it to dependencies in pyproject.toml, or the "
              f"installed family does not import.")
    if skeleton.gitignore_append:
        print(f"Appended to .gitignore: {' '.join(skeleton.gitignore_append)}")
    print(f"Places to fill: grep -rn '{TODO}' .\n"
          f"Check it:       kernel-harness check {skeleton.name} --profile dev\n"
          f"Its tests:      pytest tests/test_{skeleton.package}.py\n"
          f"Install it:     pip install -e .  (the entry point then finds it from anywhere)")
    return 0
