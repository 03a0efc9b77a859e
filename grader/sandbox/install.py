"""The grader code that sandbox workers import: a private copy, never the checkout.

A worker needs the ``grader`` package (its probes, the plain-data codec, the guard) and
nothing else of the course.  Importing it from the course's checkout would put that
checkout -- with ``.git``, ``solutions/``, ``fixtures/`` -- on the worker's import path,
so each grading process copies the package's Python files once into a fresh folder and
every worker (and zygote) imports from there.  As root the copy is owned by root and
read-only to everyone else (folders 0755, files 0644), so the sandbox's user can read the
grader's (public) code but change nothing in it; the course's checkout itself is closed to
other users (``grader.sandbox.user.protect``).  The copy is removed when the process that
made it exits.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
from pathlib import Path

from grader.sandbox import scratch
from grader.sandbox.user import temp_root

PACKAGE = Path(__file__).resolve().parents[1]  # the running grader package
_copy: Path | None = None  # this process's copy, or (forked) its parent's


def grader_base() -> Path:
    """A folder holding a read-only copy of the ``grader`` package (made once per process;
    a forked process -- a grading pool's worker -- uses its parent's, which the parent removes)."""
    global _copy
    if _copy is not None and (_copy / "grader").is_dir():
        return _copy
    base = scratch.make("code", temp_root())
    for src in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in src.parts:
            continue
        dest = base / "grader" / src.relative_to(PACKAGE)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        _copy_bytecode(src, dest)
    if os.geteuid() == 0:
        for folder, dirs, files in os.walk(base):
            os.chmod(folder, 0o755)
            for name in files:
                os.chmod(os.path.join(folder, name), 0o644)
    mp = sys.modules.get("multiprocessing")
    if mp is not None and mp.parent_process() is not None:
        # a pool's worker process ends with os._exit, past atexit: multiprocessing's own hook
        from multiprocessing import util

        util.Finalize(None, _remove, args=(os.getpid(), base), exitpriority=0)
    else:
        atexit.register(_remove, os.getpid(), base)
    _copy = base
    return base


def _copy_bytecode(src: Path, dest: Path) -> None:
    """Give the copy the compiled module this process's own imports use, when there is one.

    Workers run with ``PYTHONDONTWRITEBYTECODE``, so without it every zygote (and every worker
    started without one) compiled the grader's source again: about 0.2 s of CPU each.  Python
    checks a ``.pyc`` against its source's modification time and size before using it, so the
    copy takes the source's time: a stale or missing ``.pyc`` is simply compiled again, as
    before.  It is the file this trusted process itself imports, so it adds nothing a worker
    could not already read."""
    import importlib.util

    try:
        cached = Path(importlib.util.cache_from_source(str(src)))
        if not cached.is_file():
            return
        st = src.stat()
        target = Path(importlib.util.cache_from_source(str(dest)))
        target.parent.mkdir(exist_ok=True)
        shutil.copyfile(cached, target)
        os.utime(dest, ns=(st.st_atime_ns, st.st_mtime_ns))
    except (OSError, NotImplementedError):
        pass  # compiled from source, as before


def _remove(pid: int, base: Path) -> None:
    if os.getpid() == pid:  # not in a forked child that inherited the hook
        shutil.rmtree(base, ignore_errors=True)
