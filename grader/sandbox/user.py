"""Who the sandbox runs as, and what that user may read.

Run as an ordinary user, the grader starts the sandbox as that same user: there is no one
to switch to, and the sandbox can read whatever that user can (the README says so).

Run as root (Gradescope, most CI containers), the grader runs learner code as an
unprivileged user instead -- a user id of the sandbox's own unless ``GRADER_SANDBOX_USER``
names an account -- and makes sure that user cannot read the course's secrets:

* the hidden checks are copied into a private (0700, root-owned) folder before grading,
  and their source folder, ``solutions/`` and ``fixtures/`` are closed to other users
  (``protect``: group and other permissions removed from those folders, nothing else);
* the learner's files are copied into the sandbox's own folder, owned by the sandbox user,
  so their checkout may stay wherever it is;
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
from pathlib import Path

NOGROUP = 65534  # the group of the per-sandbox users
#: Copied with the learner's file: its folder, minus what is never needed (caps keep a
#: hostile checkout from filling the disk).
COPY_SKIP = {".git", "__pycache__", ".venv", "node_modules"}
COPY_MAX_FILES, COPY_MAX_BYTES = 200, 32 << 20


@dataclasses.dataclass(frozen=True)
class SandboxUser:
    name: str
    uid: int
    gid: int
    per_sandbox: bool = False  # a user id of this sandbox's own (not an account)

    @property
    def env_value(self) -> str:
        return f"{self.uid}:{self.gid}"


#: Per-sandbox user ids: far above the ids of real accounts; see ``sandbox_user``.
UID_BASE = 10_000_000
_counter = itertools.count()


def isolating() -> bool:
    """Whether learner code runs as another user (only root can switch)."""
    return os.geteuid() == 0


def sandbox_user() -> SandboxUser | None:
    """The user the next sandbox runs learner code as, or None when the grader is not root.

    By default every sandbox gets a user id of its own, unused by any account
    (``UID_BASE + 64 * pid + n``: unique among the sandboxes alive on the machine), so two
    submissions graded side by side (``grade batch -j 2``) cannot signal, trace or write
    into each other.  ``GRADER_SANDBOX_USER=name`` runs every sandbox as that account.
    """
    if not isolating():
        return None
    name = os.environ.get("GRADER_SANDBOX_USER")
    if not name:
        uid = UID_BASE + 64 * os.getpid() + next(_counter) % 64
        return SandboxUser(f"uid {uid}", uid, NOGROUP, per_sandbox=True)
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


def copy_submission(module_path: Path, dest: Path, user: SandboxUser) -> Path:
    """Copy the learner's file and its folder's other files into ``dest`` (owned by ``user``);
    returns the copy of ``module_path``."""
    src = module_path.parent
    dest.mkdir(parents=True, exist_ok=True)
    files = total = 0
    for root, dirs, names in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d not in COPY_SKIP and not d.startswith("."))
        rel = Path(root).relative_to(src)
        for name in sorted(names):
            s = Path(root) / name
            if s.is_symlink() or not s.is_file():
                continue
            files += 1
            total += s.stat().st_size
            if files > COPY_MAX_FILES or total > COPY_MAX_BYTES:
                if s != module_path:
                    continue
            (dest / rel).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(s, dest / rel / name)
    shutil.copyfile(module_path, dest / module_path.name)  # always there, whatever the caps skipped
    for root, dirs, names in os.walk(dest):
        os.chown(root, user.uid, user.gid)
        for name in names:
            os.chown(Path(root) / name, user.uid, user.gid)
    return dest / module_path.name


def cache_dir(key: str, user: SandboxUser) -> Path:
    """As root, the compile cache of one submission folder (``key``): a folder only the
    current sandbox's user can open, under a base that others may enter but not list
    (``GRADER_ROOT_CACHE``, default /var/tmp/jax-exercises-grader).  It is handed to each
    new sandbox user in turn; no other submission's sandbox ever gets it."""
    base = Path(os.environ.get("GRADER_ROOT_CACHE") or "/var/tmp/jax-exercises-grader")
    base.mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o711)
    folder = base / key
    folder.mkdir(mode=0o700, exist_ok=True)
    for root, _, names in os.walk(folder):  # never through a link an earlier user planted
        os.lchown(root, user.uid, user.gid)
        for name in names:
            os.lchown(Path(root) / name, user.uid, user.gid)
    return folder


def kill_all_processes_of(user: SandboxUser) -> None:
    """End every process still running as a per-sandbox user -- including any the learner's
    code started in a session of its own, out of reach of the process-group kill.  Only for
    per-sandbox users: a named account may run other things."""
    if not user.per_sandbox:
        return
    import subprocess

    # kill(-1) from a process of that user reaches all of its processes but itself; the
    # shell's own `kill` takes -1 everywhere (kill binaries disagree on how to spell it)
    cmd = ["/bin/sh", "-c", "kill -9 -1"]
    try:
        subprocess.run(cmd, user=user.uid, group=user.gid, extra_groups=[],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        pass
