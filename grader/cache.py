"""The persistent XLA compile cache of a learner's own gradings, kept small and safe.

Re-grading the same file skips XLA's compile work when JAX finds the programs in its
persistent cache.  The cache is used only where nothing that counts is at stake: a
public-only grading, not as root (``grader.runner.compile_cache_for``).  Even there:

* each cache folder is keyed by the *contents* of the graded files (the snapshot's
  digest), so what one version of a file wrote is never read while grading another;
* folders are created, never followed through a link, and must belong to the grader's
  user; anything else found in their place is refused (the cache is then simply off);
* the whole cache is capped at ``MAX_TOTAL_BYTES``: the folders used least recently go
  first; ``grade cache clear`` (and ``make clean``) remove it all.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path

MAX_TOTAL_BYTES = 256 << 20


def usable() -> bool:
    """Whether the persistent caches (this compile cache, the learner-free workers' answers:
    ``grader.sandbox.memo``) may be used by a public-only grading: not when turned off
    (``GRADER_NO_CACHE=1``), and not as root, where learner code runs as users of its own and
    one cache shared between them would be a channel between gradings."""
    from grader.sandbox import user

    return os.environ.get("GRADER_NO_CACHE") != "1" and not user.isolating()


def cache_base() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jax-exercises-grader"


def _own_folder(path: Path) -> bool:
    """``path`` is (now) a real folder of ours, not a link or someone else's."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


def compile_cache_folder(key: str) -> Path | None:
    """The cache folder for files with digest ``key`` (None when it cannot be made safely)."""
    base = cache_base()
    try:
        base.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not _own_folder(base) or not key.isalnum():
        return None
    folder = base / key
    if not _own_folder(folder):
        return None
    os.utime(folder)  # most recently used
    prune(base)
    return folder


def _size(folder: Path) -> int:
    total = 0
    for root, _, names in os.walk(folder, followlinks=False):
        for name in names:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def prune(base: Path | None = None, limit: int = MAX_TOTAL_BYTES) -> int:
    """Remove the least recently used folders until the cache fits ``limit``; returns bytes freed."""
    base = base or cache_base()
    try:
        folders = [p for p in base.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return 0
    sized = sorted(((p.stat().st_mtime, _size(p), p) for p in folders), key=lambda t: t[0])
    total = sum(size for _, size, _ in sized)
    freed = 0
    for _, size, path in sized:
        if total <= limit:
            break
        shutil.rmtree(path, ignore_errors=True)
        total -= size
        freed += size
    return freed


def clear() -> tuple[int, int]:
    """Remove the whole cache; returns (folders, bytes) removed."""
    base = cache_base()
    if not base.is_dir() or base.is_symlink():
        return 0, 0
    folders = [p for p in base.iterdir() if p.is_dir() and not p.is_symlink()]
    size = sum(_size(p) for p in folders)
    shutil.rmtree(base, ignore_errors=True)
    return len(folders), size


@contextlib.contextmanager
def course_cache():
    """A compile cache shared by the gradings of the course's own files, for as long as
    the block runs, then removed (``grade verify``, the test suite's right-file gradings and
    its ``grade compare`` classes).

    Every worker of those gradings -- the graded file's sandboxes, the reference solution's,
    the clean worker -- reads and writes it, so a program that one fixture, idiom or
    solution compiled (the reference step of the drawn shapes, the clean worker's truth,
    the parts of a fixture that are the solution's) is compiled once per run instead of once
    per grading.  Compile *counts* are unchanged: the grader counts misses of JAX's
    in-memory caches (``grader.sandbox.meter``), which a persistent-cache hit still is, and
    an executable read back gives the same answers, costs and HLO as the one compiled.

    Never for a learner's file and never for a cheat: a folder every sandbox user may write
    is a channel between gradings, harmless only when every graded file is the course's
    own and honest.  As root the sandboxes run as users of their own, all in group
    ``NOGROUP``: the folder is that group's (setgid, 2770) -- not writable by others, so the
    sweep of what a sandbox user left in the shared temporary folders does not go in."""
    from grader.sandbox import scratch, user

    folder = scratch.make("xlacache")
    try:
        if user.isolating():
            os.chown(folder, 0, user.NOGROUP)
            os.chmod(folder, 0o2770)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
