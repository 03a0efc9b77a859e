"""What one sandbox may write to disk, in total, and how that is held.

A per-file limit (``RLIMIT_FSIZE``) does not bound a sandbox: a loop of files just under
it, or millions of empty files, fills the machine's temporary file system -- the one the
gradebook, the result files and every other sandbox of ``grade batch -j N`` live on.  So
everything a sandbox can write (its folder: the copy of the learner's files, ``HOME``,
``TMPDIR``) has a budget of ``SANDBOX_DISK_MB`` MiB and ``SANDBOX_DISK_FILES`` files and
folders, held two ways:

* **A hard cap, as root** (``private_tmpfs``, in the worker before it drops privileges):
  the worker enters a mount namespace of its own and mounts a tmpfs of exactly that size
  and inode count over its folder, holding a copy of what the grader put there.  A write
  past it fails with ``ENOSPC`` in the learner's code; the worker reports that as "your
  code wrote more than N MiB" (kind ``disk``).  The file system dies with the worker, so
  nothing is left to clean up.  It needs ``CAP_SYS_ADMIN`` (a container without it, e.g.
  Docker's default profile, refuses ``unshare``): then only the watchdog holds.
* **An enforced budget, everywhere** (``Watchdog``, on the trusted side): one thread
  measures every live sandbox's folder every ``WATCH_INTERVAL_S`` s (allocated blocks, so
  sparse and preallocated files count as what they take; the walk stops at the budget) and
  kills a sandbox over it; the learner is told the same thing.  Between two looks a
  sandbox can write at most what the disk takes in ``WATCH_INTERVAL_S`` s; as root the
  tmpfs makes that moot.

Either way the folder is removed when the sandbox closes.  Writes outside the folder are
refused by the guard (and, as root, what the sandbox's user left in the shared temporary
folders is removed at close: ``grader.sandbox.user``).
"""

from __future__ import annotations

import os
import stat
import threading

SANDBOX_DISK_MB = 256  # everything one sandbox may write (and the learner's files it starts with)
SANDBOX_DISK_FILES = 20_000  # files and folders in it
WATCH_INTERVAL_S = 0.1
NO_TMPFS_ENV = "GRADER_NO_TMPFS"  # set in a worker's environment: no private tmpfs (the watchdog alone)

_CLONE_NEWNS = 0x00020000
_MS_NOSUID, _MS_NODEV, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x4000, 1 << 18


def usage(path: str | os.PathLike, stop_bytes: int | None = None, stop_entries: int | None = None) -> tuple[int, int]:
    """(bytes of disk allocated, files and folders) below ``path``, never following a link;
    the walk stops as soon as either ``stop_*`` bound is passed."""
    total = entries = 0
    stack = [os.fspath(path)]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    entries += 1
                    total += st.st_blocks * 512 if hasattr(st, "st_blocks") else st.st_size
                    if stat.S_ISDIR(st.st_mode):
                        stack.append(entry.path)
                    if (stop_bytes is not None and total > stop_bytes) or \
                            (stop_entries is not None and entries > stop_entries):
                        return total, entries
        except OSError:
            continue
    return total, entries


def over_budget_message(disk_mb: int) -> str:
    return (f"your code wrote more than {disk_mb} MiB (or {SANDBOX_DISK_FILES} files) to disk, the most a sandbox "
            f"may write in all; it was stopped there")


# --- the hard cap: a private tmpfs (in the worker, as root) -----------------------------------

def private_tmpfs(folder: str, uid: int, gid: int, disk_mb: int = SANDBOX_DISK_MB) -> bool:
    """Mount a tmpfs of ``disk_mb`` MiB and ``SANDBOX_DISK_FILES`` inodes over ``folder``
    in a mount namespace of this process's own, owned by ``uid:gid``, holding a copy of
    what ``folder`` held; make it the working folder.  Call as root, single-threaded,
    before privileges drop.  False (nothing changed that matters) where the kernel or the
    container refuses."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    if libc.unshare(_CLONE_NEWNS) != 0:
        return False
    # nothing mounted here may show in the grader's namespace (a shared "/" would propagate it)
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        return False
    below = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        options = f"size={disk_mb}m,nr_inodes={SANDBOX_DISK_FILES},mode=0700,uid={uid},gid={gid}"
        if libc.mount(b"grade-sandbox", os.fsencode(folder), b"tmpfs", _MS_NOSUID | _MS_NODEV,
                      options.encode()) != 0:
            return False
        top = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            _copy_tree(below, top, uid, gid)
        finally:
            os.close(top)
    finally:
        os.close(below)
    os.chdir(folder)  # the old working folder is the one under the mount
    return True


def _copy_tree(src: int, dst: int, uid: int, gid: int) -> None:
    """Copy the regular files and folders below ``src`` into ``dst`` (both folder fds)."""
    for entry in os.scandir(src):
        st = entry.stat(follow_symlinks=False)
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISDIR(st.st_mode):
            os.mkdir(entry.name, mode, dir_fd=dst)
            a = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=src)
            b = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dst)
            try:
                _copy_tree(a, b, uid, gid)
                os.fchown(b, uid, gid)
            finally:
                os.close(a)
                os.close(b)
        elif stat.S_ISREG(st.st_mode):
            a = os.open(entry.name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=src)
            b = os.open(entry.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=dst)
            try:
                while True:
                    chunk = os.read(a, 1 << 20)
                    if not chunk:
                        break
                    os.write(b, chunk)
                os.fchown(b, uid, gid)
                os.fchmod(b, mode)
            finally:
                os.close(a)
                os.close(b)


# --- the enforced budget: a watchdog (on the trusted side) ----------------------------------------

class Watchdog:
    """One thread per grading process that measures every watched folder and calls its
    ``over`` callback (once) when the folder passes its budget."""

    _instance: "Watchdog | None" = None
    _instance_lock = threading.Lock()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: dict[int, tuple[str, int, object]] = {}
        self._next = 0
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def shared(cls) -> "Watchdog":
        with cls._instance_lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def watch(self, folder: str | os.PathLike, budget_bytes: int, over) -> int:
        """Watch ``folder``; ``over(bytes, entries)`` is called once if it passes
        ``budget_bytes`` or ``SANDBOX_DISK_FILES`` entries.  Returns a ticket for ``forget``."""
        with self._lock:
            self._next += 1
            ticket = self._next
            self._watched[ticket] = (os.fspath(folder), budget_bytes, over)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="grade-disk-watchdog", daemon=True)
                self._thread.start()
        return ticket

    def forget(self, ticket: int) -> None:
        with self._lock:
            self._watched.pop(ticket, None)

    def check_now(self) -> None:
        """Measure every watched folder once, now (what the thread does every interval)."""
        with self._lock:
            items = list(self._watched.items())
        for ticket, (folder, budget, over) in items:
            used, entries = usage(folder, stop_bytes=budget, stop_entries=SANDBOX_DISK_FILES)
            if used > budget or entries > SANDBOX_DISK_FILES:
                with self._lock:
                    if self._watched.pop(ticket, None) is None:
                        continue
                try:
                    over(used, entries)
                except Exception:  # noqa: BLE001 - one sandbox's callback must not stop the watch
                    pass

    def _run(self) -> None:
        while True:
            self._wake.wait(WATCH_INTERVAL_S)
            with self._lock:
                if not self._watched:
                    self._thread = None
                    return
            self.check_now()
