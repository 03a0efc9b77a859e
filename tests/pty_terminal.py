"""A program on a pseudo-terminal, for tests and the bench that drive `grade watch`."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


class Terminal:
    """A program on a pty: read what it shows, type keys."""

    def __init__(self, argv, cwd, env):
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env,
                                     start_new_session=True)
        os.close(slave)
        self.buf = b""

    def screen(self) -> str:
        return ANSI.sub(b"", self.buf).decode("utf-8", "replace")

    def wait_for(self, pattern: str, timeout: float = 90.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.02)
            if ready:
                try:
                    self.buf += os.read(self.master, 65536)
                except OSError:
                    break
                if re.search(pattern, self.screen()):
                    return self.screen()
        raise AssertionError(f"never showed {pattern!r}; the screen:\n{self.screen()[-3000:]}")

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def close(self) -> int:
        try:
            return self.proc.wait(timeout=15)
        finally:
            os.close(self.master)
