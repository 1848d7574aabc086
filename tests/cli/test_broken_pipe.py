"""`kernel-harness list | grep -q ...`: a reader that goes away is no traceback."""

from __future__ import annotations

import subprocess
import sys


def test_a_closed_stdout_exits_141_without_a_traceback():
    code = "from kernel_harness.cli import main; raise SystemExit(main(['list']))"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line is written
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 141, err.decode()
    assert b"Traceback" not in err, err.decode()
