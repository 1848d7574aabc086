"""The ``kernel-harness`` command line: the leaf of the package (nothing imports it).

One module per subcommand, each with ``add_parser`` and ``run``. Bad input
(unknown family, backend or profile; an ``--impl`` that does not import or is
not callable; a backend not available here) prints one line on stderr and exits
2, without a traceback. ``check`` exits 0 only when every property of every
family passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from kernel_harness.cli import (
    bad_input,
    bench,
    check,
    common,
    corpus,
    describe,
    export_repro,
    gate,
    golden,
    init,
    listing,
    lower,
    merge,
    mutate,
    repro,
    shard,
)
from kernel_harness.core import devices
from kernel_harness.core.errors import UsageError
from kernel_harness.records import registry
from kernel_harness.records.config import load_config
from kernel_harness.run import diagnostics, impl_source


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``kernel-harness``."""
    parser = argparse.ArgumentParser(
        prog="kernel-harness", description="A correctness harness for JAX Pallas kernels.",
        parents=[_family_module_parser(add_help=False)],
    )
    sub = parser.add_subparsers(dest="command", required=True)
    listing.add_parsers(sub)
    for module in (check, describe, repro, export_repro, golden, gate, mutate, lower,
                   bad_input, shard, bench, corpus, merge, init):
        module.add_parser(sub)
    return parser


def _family_module_parser(add_help: bool) -> argparse.ArgumentParser:
    # No abbreviations: ``--family NAME`` must not read as ``--family-module NAME``.
    parser = argparse.ArgumentParser(add_help=add_help, allow_abbrev=False)
    parser.add_argument(
        "--family-module", action="append", default=[], metavar="MODULE",
        help="import MODULE and register the Family objects it declares (an out-of-tree "
        "family); allowed anywhere on the command line, repeatable",
    )
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parses a ``kernel-harness`` command line. ``--family-module MODULE`` may appear
    anywhere (before or after the subcommand) and applies to every subcommand."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if "--family" in argv or any(a.startswith("--family=") for a in argv):
        parser.error("--family is not an option: name the families as arguments, e.g. "
                     "`kernel-harness check gpu-mha splash` (an out-of-tree family's module: "
                     "--family-module MODULE)")
    known, rest = _family_module_parser(add_help=False).parse_known_args(argv)
    args = parser.parse_args(rest)
    args.family_module = known.family_module
    return args


COMMANDS = {"list": listing.run_list, "select": listing.run_select, "check": check.run,
            "describe": describe.run, "repro": repro.run, "export-repro": export_repro.run,
            "golden": golden.run, "gate": gate.run, "mutate": mutate.run, "lower": lower.run,
            "bad-input": bad_input.run, "shard": shard.run, "bench": bench.run,
            "corpus": corpus.run, "merge": merge.run, "init": init.run}


def hypothesis_storage() -> None:
    """Points Hypothesis's own files (its cache of the constants it mixes into draws) at
    ``$XDG_CACHE_HOME/kernel-harness/hypothesis`` unless ``HYPOTHESIS_STORAGE_DIRECTORY``
    is set: otherwise every ``kernel-harness`` command would leave a ``.hypothesis/`` folder
    in whatever directory it ran in. (The harness's profiles keep no example database:
    :mod:`kernel_harness.run.profiles`.) The CLI owns its process, so it may set this; the
    library (pytest, ``testing.check``) leaves the user's Hypothesis configuration alone."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY",
                          os.path.join(base, "kernel-harness", "hypothesis"))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kernel-harness`` console script.

    The user's ``[tool.kernel-harness]`` (:func:`kernel_harness.records.config.load_config`,
    from the working directory up) is read first: its ``family-modules`` are registered
    before ``--family-module``'s, its ``waivers`` apply to every command that runs kernels
    on tpu-interpret, and it supplies ``--backend`` / ``--profile`` where the
    command line leaves them unset (:func:`kernel_harness.cli.common.apply_config`)."""
    devices.request_cpu_devices()  # before anything starts jax: collective families
    hypothesis_storage()
    args = parse_args(argv)
    try:
        args.config = load_config()
        # init uses no registry: a family module of the configuration that does not
        # import (a skeleton being filled in) must not stop it.
        if args.config.family_modules and args.command != "init":
            registry.load_family_modules(args.config.family_modules,
                                         search_path=args.config.root,
                                         origin=args.config.where("family-modules"))
        registry.load_family_modules(args.family_module)
        common.apply_config(args, args.config)
        if args.config.waivers:  # repro, golden...: a check's session puts its own in force
            diagnostics.use_user_waivers(diagnostics.user_waivers(args.config.waivers,
                                                                  str(args.config.source)))
        if args.config.accepted_source:  # the same for the source check's accepted lines
            impl_source.use_accepted(args.config.accepted_source, str(args.config.source))
        return COMMANDS[args.command](args)
    except UsageError as e:
        print(f"kernel-harness: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`kernel-harness list | head`): no traceback; the exit status
        # of a process a SIGPIPE ended, as shells report it. stdout goes to devnull so the
        # interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


