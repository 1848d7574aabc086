"""Output paths checked before any work: a results file that cannot be written is a usage
error at the start (one line, exit 2), not a traceback after a six-hour run.

:func:`ensure_writable` takes the flags a command writes to (``--json``, ``--junit``,
``--plot-dir``, ``--compile-cache``, ...) and proves each one writable the way the command
will write it: a file's folder is created (as the writers do) and a probe file is created in
it and removed; a folder is created and probed the same way. The target file itself is not
created, so a run that ends early leaves no empty results file behind.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Collection, Mapping
from pathlib import Path

from kernel_harness.core.errors import UsageError
from kernel_harness.run import compile_cache

#: Flags whose value is a folder the command writes into (the others name one file).
DIRECTORY_FLAGS: frozenset[str] = frozenset({"--plot-dir", "--compile-cache", "--golden-dir"})


_PROBE = ".kernel-harness-probe-"


def _probe(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=_PROBE, dir=folder)
    os.close(fd)
    os.unlink(name)


def _why(e: OSError) -> str:
    text = e.strerror or type(e).__name__
    where = e.filename if isinstance(e.filename, str) else None
    if where and Path(where).name.startswith(_PROBE):
        where = str(Path(where).parent)
    return f"{text} ({where})" if where else text


def ensure_writable(paths: Mapping[str, Path | str | None], *,
                    directories: Collection[str] = DIRECTORY_FLAGS) -> None:
    """Raises :class:`UsageError` naming the first flag whose path cannot be written.

    ``paths`` maps a flag (``"--json"``) to its value; ``None`` (flag not given) is
    skipped, except for ``--compile-cache``, whose value is resolved as the run will
    resolve it (:func:`kernel_harness.run.compile_cache.resolve`: the flag, else
    ``$KERNEL_HARNESS_COMPILE_CACHE``, else the default folder; ``off``: nothing written).
    Flags in ``directories`` name folders, the rest files. The message is one line:
    ``--json /proc/no/such/r.json: cannot write: No such file or directory (/proc/no)``.
    """
    for flag, value in paths.items():
        if flag == "--compile-cache":
            resolved = compile_cache.resolve(None if value is None else str(value))
            if resolved is not None and value is None:
                flag = f"compile cache (${compile_cache.ENV_VAR} or its default)"
                directories = {*directories, flag}
            value = resolved
        if value is None:
            continue
        path = Path(value).expanduser()
        try:
            if flag in directories:
                if path.exists() and not path.is_dir():
                    raise UsageError(f"{flag} {value}: cannot write: not a folder")
                _probe(path)
            else:
                if path.is_dir():
                    raise UsageError(f"{flag} {value}: cannot write: is a folder")
                if path.exists() and not os.access(path, os.W_OK):
                    raise UsageError(f"{flag} {value}: cannot write: permission denied")
                _probe(path.parent)
        except OSError as e:
            raise UsageError(f"{flag} {value}: cannot write: {_why(e)}") from None


__all__ = ["DIRECTORY_FLAGS", "ensure_writable"]
