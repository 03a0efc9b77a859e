"""The grader's temporary folders: each named after the process that made it.

A grading makes a few folders in the temporary folder (the checks it runs, each sandbox's
box, the grader code workers import, the hidden checks unpacked from a tarball) and removes
them when it ends.  A grader that is killed (SIGKILL, the machine's OOM killer, a CI job
cancelled hard) cannot, so every folder is named ``grade-<kind>-<pid namespace>-<pid>-...``
and the next grading removes those whose process is gone (``sweep``): only real folders
(never a link), owned by the user sweeping, made in the same pid namespace (a container
sharing the temporary folder has pids of its own).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

_NAME = re.compile(r"^grade-[a-z]+-(\d+)-(\d+)-[A-Za-z0-9_]+$")
_swept = False


def _namespace() -> int:
    """This process's pid namespace (its inode on Linux; 0 where there is none to read)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


_NAMESPACE = _namespace()


def make(kind: str, dir: str | None = None) -> Path:
    """A new private (0700) folder ``grade-<kind>-<namespace>-<pid>-...`` in ``dir``
    (default: the temporary folder)."""
    return Path(tempfile.mkdtemp(prefix=f"grade-{kind}-{_NAMESPACE}-{os.getpid()}-", dir=dir))


def sweep(places: tuple[str | None, ...] = (None, "/tmp")) -> list[Path]:
    """Remove the folders of graders that are no longer running (once per process);
    returns what was removed."""
    global _swept
    if _swept:
        return []
    _swept = True
    removed = []
    for place in dict.fromkeys(os.path.realpath(p or tempfile.gettempdir()) for p in places):
        try:
            names = os.listdir(place)
        except OSError:
            continue
        for name in names:
            m = _NAME.match(name)
            if m is None or int(m.group(1)) != _NAMESPACE or _alive(int(m.group(2))):
                continue
            path = os.path.join(place, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():
                shutil.rmtree(path, ignore_errors=True)
                removed.append(Path(path))
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process: alive
    return True
