"""``kernel-harness init NAME --kernel MODULE:FUNC``: a family package skeleton here.

Writes, in the working directory (never over an existing file: exit 2), a family
package that passes ``kernel-harness check NAME`` as written (see
:mod:`kernel_harness.spec.scaffold`), and prints what it wrote and what to do next.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernel_harness.spec.scaffold import TODO, plan, write


def add_parser(sub: Any) -> None:
    """Adds ``init`` to the ``kernel-harness`` subparsers."""
    p = sub.add_parser("init", help="write a family package skeleton for your kernel here")
    p.add_argument("name", help="the family's name (e.g. my-softmax)")
    p.add_argument("--kernel", required=True, metavar="MODULE:FUNC",
                   help="your kernel's function; a module that does not exist yet gets a "
                   "placeholder Pallas kernel")


def run(args: Any) -> int:
    """Runs ``kernel-harness init``: 0 written, 2 refused (bad name, existing files)."""
    target = Path.cwd()
    skeleton = plan(args.name, args.kernel, target)
    written = write(skeleton, target)
    print(f"kernel-harness init: wrote the family {skeleton.name} in {target}:")
    for path in written:
        print(f"  {path.relative_to(target)}")
    if skeleton.placeholder_kernel:
        print(f"\n{args.kernel} is a placeholder Pallas kernel (y = 2 * x + 1) and the reference "
              f"its math, so the check passes as written. Replace both with yours.")
    else:
        print(f"\n{args.kernel} is your kernel; the reference is a placeholder (y = 2 * x + 1), "
              f"so the check fails until reference.py, cases.py and family.run are yours.")
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
