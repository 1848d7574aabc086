"""The project's ``[[tool.kernel-harness.accepted-source]]`` put in force for tests that call
the runner in-process (``check_case``), as a check session puts it in force for each unit;
restored after (the acceptance is process-wide)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from kernel_harness.records.config import load_config
from kernel_harness.run import impl_source

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def project_accepted_source(*, none: bool = False) -> Iterator[None]:
    """The lines the project's pyproject.toml accepts (``none``: no line) in force inside
    the block, whatever an earlier check session of this process put in force."""
    config = load_config(ROOT)
    before = impl_source.accepted_in_force()
    impl_source.use_accepted(() if none else config.accepted_source, str(config.source))
    try:
        yield
    finally:
        impl_source.use_accepted(*before)
