"""Who the sandbox runs as, and what that user may read.

Run as an ordinary user, the grader starts the sandbox as that same user: there is no one
to switch to, and the sandbox can read whatever that user can (the README says so).

Run as root (Gradescope, most CI containers), the grader runs learner code as an
unprivileged user instead -- a user id of the sandbox's own unless ``GRADER_SANDBOX_USER``
names an account -- and makes sure that user cannot read the course's secrets:

* the hidden checks are copied into a private (0700, root-owned) folder before grading,
  and their source folder, ``solutions/`` and ``fixtures/`` are closed to other users
  (``protect``: group and other permissions removed from those folders, nothing else);
* the learner's files are copied into the sandbox's own folder (``hand_over``), owned by
  the sandbox user, so their checkout may stay wherever it is;
* closing a sandbox ends every process of its user and removes what it left in the shared
  temporary folders (``release``); a named account (``GRADER_SANDBOX_USER``) is used by
  one grading process at a time on the whole machine (``acquire``);
* the worker starts as root only to import JAX and the grader's probes, then drops to the
  sandbox user for good (``setgroups([])``, ``setgid``, ``setuid``) before the learner's
  module is imported (see ``grader.sandbox.worker``).

Python itself may live where the sandbox user cannot go (pyenv under ``/root``, a virtual
environment in a closed folder).  Before the drop the worker opens each folder it imports
from that lies below such a closed folder, and afterwards imports through those open
descriptors (``/proc/self/fd/N``), so modules JAX loads lazily still load; nothing above
those folders becomes reachable (see ``grader.sandbox.worker``).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import pwd
import shutil
import stat
import tempfile
from pathlib import Path

NOGROUP = 65534  # the group of the per-sandbox users


@dataclasses.dataclass(frozen=True)
class SandboxUser:
    name: str
    uid: int
    gid: int
    per_sandbox: bool = False  # a user id of this sandbox's own (not an account)

    @property
    def env_value(self) -> str:
        return f"{self.uid}:{self.gid}"


#: Per-sandbox user ids: far above the ids of real accounts; see ``sandbox_user``.  SLOTS ids
#: per grading process: with Linux's largest pid (2**22) the last id stays below 2**31.
UID_BASE = 10_000_000
SLOTS = 512
_counter = itertools.count()
_live_uids: set[int] = set()  # per-sandbox uids of this process's open sandboxes


def isolating() -> bool:
    """Whether learner code runs as another user (only root can switch)."""
    return os.geteuid() == 0


def sandbox_user() -> SandboxUser | None:
    """The user the next sandbox runs learner code as, or None when the grader is not root.

    By default every sandbox gets a user id of its own, unused by any account
    (``UID_BASE + SLOTS * pid + n``, n skipping those this process's open sandboxes hold: unique
    among the sandboxes alive on the machine), so two
    submissions graded side by side (``grade batch -j 2``) cannot signal, trace or write
    into each other.  ``GRADER_SANDBOX_USER=name`` runs every sandbox as that account.
    """
    if not isolating():
        return None
    name = os.environ.get("GRADER_SANDBOX_USER")
    if not name:
        for _ in range(SLOTS):  # never one a sandbox of this process still runs as (release frees it)
            uid = UID_BASE + SLOTS * os.getpid() + next(_counter) % SLOTS
            if uid not in _live_uids:
                _live_uids.add(uid)
                return SandboxUser(f"uid {uid}", uid, NOGROUP, per_sandbox=True)
        raise RuntimeError(f"{SLOTS} sandboxes of this grading process are open at once; close some first")
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise ValueError(f"GRADER_SANDBOX_USER={name!r} is not a user on this machine") from None
    if entry.pw_uid == 0:
        raise ValueError(f"the sandbox user {name!r} is root; name an unprivileged user in GRADER_SANDBOX_USER")
    return SandboxUser(name, entry.pw_uid, entry.pw_gid)


def deepest_closed_folder(path: Path) -> Path | None:
    """The deepest folder above ``path`` that users other than its owner and group cannot
    enter (no execute permission for them), or None."""
    closed = None
    for folder in reversed(Path(path).parents):
        try:
            if not folder.stat().st_mode & stat.S_IXOTH:
                closed = folder
        except OSError:
            return None
    return closed


def readable_by_others(path: Path) -> bool:
    """Whether a user that is neither the owner nor in the group can reach ``path``: read it
    (a file) or open the files in it by name (a folder: execute permission is enough)."""
    path = Path(path).resolve()
    try:
        need = stat.S_IXOTH if path.is_dir() else stat.S_IROTH
        return deepest_closed_folder(path) is None and bool(path.stat().st_mode & need)
    except OSError:
        return False


def temp_root() -> str | None:
    """Where to make the folders a sandbox's user must enter (the grader's code, the
    sandbox's own folder): the default temporary folder (None), unless the grader is root
    and other users cannot enter that one (a ``TMPDIR`` inside a private home); then
    ``/tmp``.  Neither: a clear error rather than a sandbox that cannot read its own files."""
    default = tempfile.gettempdir()
    if not isolating() or _enterable_by_others(default):
        return None
    if _enterable_by_others("/tmp"):
        return "/tmp"
    raise RuntimeError(f"the sandbox's user cannot enter the temporary folder {default} (nor /tmp): "
                       f"set TMPDIR to a folder every user can enter, such as /tmp")


def _enterable_by_others(folder: str) -> bool:
    try:
        return deepest_closed_folder(Path(folder) / "x") is None
    except OSError:
        return False


def protect(paths: list[Path]) -> list[Path]:
    """Close each existing file or folder in ``paths`` to group and others when another user
    could read it; returns those changed.  Only that one mode changes: with no execute
    permission on a folder, nothing below it can be reached by anyone but its owner."""
    changed = []
    for p in paths:
        p = Path(p)
        if p.exists() and readable_by_others(p):
            os.chmod(p, stat.S_IMODE(p.stat().st_mode) & ~0o077)
            changed.append(p)
    return changed


def hand_over(folder: Path, user: SandboxUser) -> None:
    """Give the sandbox's own folder (made by the grader, holding fresh copies of the
    learner's files) to its user; links are never followed (there are none to follow)."""
    for root, dirs, names in os.walk(folder, followlinks=False):
        os.lchown(root, user.uid, user.gid)
        for name in dirs + names:
            os.lchown(os.path.join(root, name), user.uid, user.gid)


#: Shared folders any user may write to: what a sandbox's user left there is removed at close.
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm")


def remove_files_of(user: SandboxUser, places: tuple[str, ...] = SHARED_TMP) -> list[str]:
    """Remove everything ``user`` owns in the shared temporary folders (never following a
    link); returns what was removed.  A user can only have made files in a folder it owns
    or one others may write to, so only those are searched.  The guard refuses writes
    there: this is a backstop for code it cannot see."""
    removed = []
    for top in places:
        if not os.path.isdir(top):
            continue
        for root, dirs, names in os.walk(top, topdown=True, followlinks=False):
            keep = []
            for name in dirs + names:
                path = os.path.join(root, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                if st.st_uid == user.uid:
                    if stat.S_ISDIR(st.st_mode):
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        try:
                            os.unlink(path)
                        except OSError:
                            continue
                    removed.append(path)
                elif stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_IWOTH:
                    keep.append(name)
            dirs[:] = keep
    return removed


def end_everything_of(user: SandboxUser) -> None:
    """End every process of ``user`` and remove its files from the shared temporary folders."""
    kill_all_processes_of(user)
    remove_files_of(user)


_held: dict[int, list] = {}  # named account uid -> [sandboxes of this process using it, lock fd]


def acquire(user: SandboxUser | None) -> None:
    """Before a sandbox starts.  A named account (``GRADER_SANDBOX_USER``) is shared by
    every sandbox, so only one grading process on the machine may use it at a time (a
    ``flock`` on a root-owned file, held while any sandbox of this process uses it)."""
    if user is None or user.per_sandbox:
        return
    hold = _held.get(user.uid)
    if hold is None:
        import fcntl

        folder = "/run/lock" if os.path.isdir("/run/lock") else "/tmp"
        fd = os.open(f"{folder}/jax-exercises-grader-{user.uid}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        hold = _held[user.uid] = [0, fd]
    hold[0] += 1


def release(user: SandboxUser | None) -> None:
    """After a sandbox closed: end every process of its user and remove what it left in
    the shared temporary folders -- at once for a user of its own, when the last sandbox
    of this process closes for a named account (then the account is free again)."""
    if user is None:
        return
    if user.per_sandbox:
        try:
            end_everything_of(user)
        finally:
            _live_uids.discard(user.uid)
        return
    hold = _held.get(user.uid)
    if hold is None:
        return
    hold[0] -= 1
    if hold[0] <= 0:
        try:
            end_everything_of(user)
        finally:
            del _held[user.uid]
            os.close(hold[1])  # releases the lock


def kill_all_processes_of(user: SandboxUser) -> None:
    """End every process still running as the sandbox's user -- including any the learner's
    code started in a session of its own, out of reach of the process-group kill (the
    seccomp filter refuses new processes; this is the backstop where it cannot run)."""
    import subprocess

    # kill(-1) from a process of that user reaches all of its processes but itself; the
    # shell's own `kill` takes -1 everywhere (kill binaries disagree on how to spell it)
    cmd = ["/bin/sh", "-c", "kill -9 -1"]
    try:
        subprocess.run(cmd, user=user.uid, group=user.gid, extra_groups=[],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        pass
