"""A submission's files for one exercise, read once, safely: the ``Snapshot``.

Everything the grader does with a learner's files starts here: the seed is derived from
the snapshot, the gradebook's content hash is the snapshot's digest, and the sandbox gets a
fresh copy of the snapshot's files -- never the originals.  So every rule below holds for
every later step, by construction:

* **Only regular files inside the submission.**  Each folder on the way from the
  submission's root to the exercise's folder, and each file, is opened relative to its
  parent with ``O_NOFOLLOW``: a symbolic link (to the course's solutions, to ``/dev/zero``)
  is never followed.  A learner file that is a link, a folder or a device is a submission
  problem that the learner is told about ("... is a symbolic link: commit the file
  itself"); other files of the folder that are not regular files are left out.
* **Bounded.**  At most ``MAX_FILES`` files and ``MAX_TOTAL_BYTES`` bytes are read, none
  over ``MAX_FILE_BYTES`` (a learner file over it is a problem too).  A file linked
  elsewhere by a hard link (``st_nlink > 1``) is refused like a symbolic link.
* **Two sources, one rule each.**  ``read_folder`` reads a folder as it is on disk (what
  a learner grades while working).  ``read_commit`` reads a git commit's tree from the
  object database (``git ls-tree``/``cat-file``), where links are entries of mode 120000
  and never touch the disk; ``grade ci`` and ``grade batch`` grade a repository at its
  HEAD commit this way (see ``grader.course.batch``).

The exercise's folder in a submission is ``exercises/<dir>/`` (a fork of the learners'
repository).  A submission without that layout (files uploaded to Gradescope) is searched
for the learner's first file by name, the shallowest match winning, and its folder is
read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import stat
import subprocess
from pathlib import Path, PurePosixPath

MAX_FILES, MAX_FILE_BYTES, MAX_TOTAL_BYTES = 200, 4 << 20, 32 << 20
SKIP_DIRS = frozenset({".git", "__pycache__", ".venv", "venv", "node_modules", ".ipynb_checkpoints"})
GIT_TIMEOUT_S = 120


class SnapshotProblem(Exception):
    """A learner file cannot be graded as it is; ``kind`` is a ``SubmissionError`` kind."""

    def __init__(self, kind: str, message: str, path: str = ""):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.path = path

    def __reduce__(self):  # snapshots travel to grading processes
        return (SnapshotProblem, (self.kind, self.message, self.path))


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The files of one exercise's folder in one submission, in memory."""

    origin: str  # where they came from, for people: a folder, or "repo@commit:exercises/<dir>"
    module_file: str  # the learner file that is imported, relative to the folder
    files: dict[str, bytes]  # relative path -> contents (learner files and the folder's other files)
    left_out: tuple[str, ...] = ()  # what was not read, and why
    problem: SnapshotProblem | None = None  # set when a learner file cannot be graded
    path: str = ""  # the learner file's path in the checkout, when it is not origin/module_file

    def digest(self) -> str:
        """A hash of every file's name and contents (the gradebook's content hash)."""
        h = hashlib.sha256(b"grade-snapshot-v1\0")
        for name in sorted(self.files):
            h.update(name.encode("utf-8", "surrogateescape") + b"\0" + self.files[name] + b"\0")
        if self.problem is not None:
            h.update(f"problem:{self.problem.kind}:{self.problem.path}".encode("utf-8", "surrogateescape"))
        return h.hexdigest()[:32]

    def seed(self, exercise_number: int) -> int:
        """The default seed: the same files always draw the same inputs, any edit new ones."""
        h = hashlib.sha256(f"grade-seed-v2:{exercise_number}:".encode() + self.digest().encode())
        return int.from_bytes(h.digest()[:4], "big")

    @property
    def display_path(self) -> str:
        """The learner file's path as the learner knows it (``origin`` itself when it names a
        file: a single file graded with ``--file``, or a fixture)."""
        if self.path:
            return self.path
        if self.origin.endswith(".py"):
            return self.origin
        return f"{self.origin}/{self.module_file}"

    def source(self) -> bytes:
        return self.files.get(self.module_file, b"")

    def write_to(self, dest: Path) -> Path:
        """Write the files into the (new, empty) folder ``dest``; returns the learner file's
        path there.  Files are created exclusively and never through a link."""
        dest = Path(dest)
        for name, data in sorted(self.files.items()):
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        return dest / self.module_file


# --- reading a folder --------------------------------------------------------------------

def _open_dir(parent_fd: int | None, name: str) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    return os.open(name, flags, dir_fd=parent_fd) if parent_fd is not None else os.open(name, flags)


def _read_file(dir_fd: int, name: str, limit: int) -> bytes:
    """The contents of the regular file ``name`` in ``dir_fd``; raises SnapshotProblem."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (getattr(os, "ELOOP", 40), getattr(os, "EMLINK", 31)):
            raise SnapshotProblem("link", f"{name} is a symbolic link; commit the file itself, not a link", name)
        raise SnapshotProblem("missing_file", f"{name} could not be read ({exc.strerror})", name) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            what = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise SnapshotProblem("not_a_file", f"{name} is {what}; it should be the exercise's Python file", name)
        if st.st_nlink > 1:
            raise SnapshotProblem("link", f"{name} is a hard link to another file; commit the file itself", name)
        if st.st_size > limit:
            raise SnapshotProblem("too_large", f"{name} is {st.st_size} bytes; a learner file may have at most "
                                               f"{limit} bytes", name)
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise SnapshotProblem("too_large", f"{name} is over {limit} bytes", name)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _walk_dir(dir_fd: int, prefix: str, files: dict, left_out: list, budget: list) -> None:
    """Regular files under ``dir_fd`` (links and specials left out), within the budget."""
    try:
        entries = sorted(os.scandir(dir_fd), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        rel = f"{prefix}{entry.name}"
        if rel in files:
            continue
        if entry.is_symlink():
            left_out.append(f"{rel} (a link)")
        elif entry.is_dir(follow_symlinks=False):
            if entry.name in SKIP_DIRS or entry.name.startswith("."):
                continue
            try:
                sub = _open_dir(dir_fd, entry.name)
            except OSError:
                left_out.append(f"{rel}/ (not readable)")
                continue
            try:
                _walk_dir(sub, rel + "/", files, left_out, budget)
            finally:
                os.close(sub)
        elif entry.is_file(follow_symlinks=False):
            if entry.name.endswith((".pyc", ".so", ".pyd", ".dylib")):
                left_out.append(f"{rel} (compiled code)")
                continue
            if budget[0] >= MAX_FILES:
                left_out.append(f"{rel} (over {MAX_FILES} files)")
                continue
            try:
                data = _read_file(dir_fd, entry.name, min(MAX_FILE_BYTES, MAX_TOTAL_BYTES - budget[1]))
            except SnapshotProblem as exc:
                left_out.append(f"{rel} ({exc.message.split('; ')[0].split(' is ', 1)[-1]})")
                continue
            files[rel] = data
            budget[0] += 1
            budget[1] += len(data)
        else:
            left_out.append(f"{rel} (not a regular file)")


def read_folder(root: Path, parts: tuple[str, ...], learner_files: tuple[str, ...]) -> Snapshot:
    """The folder ``root/parts...`` (reached without following links below ``root``),
    holding ``learner_files`` (the first is the module that is imported)."""
    root = Path(os.path.realpath(root))  # the root itself is the caller's to name; nothing below it is followed
    origin = str(Path(root, *parts))
    files: dict[str, bytes] = {}
    fds: list[int] = []
    try:
        try:
            fds.append(_open_dir(None, str(root)))
            for part in parts:
                fds.append(_open_dir(fds[-1], part))
        except OSError as exc:
            where = os.path.join(*parts) if parts else str(root)
            how = "is a link" if exc.errno == getattr(os, "ELOOP", 40) or exc.errno == getattr(os, "ENOTDIR", 20) \
                else "was not found"
            kind = "link" if how == "is a link" else "missing_file"
            return Snapshot(origin, learner_files[0], {}, problem=SnapshotProblem(
                kind, f"the folder {where} {how}; the exercise's files must be in it", where))
        folder = fds[-1]
        for name in learner_files:
            try:
                files[name] = _read_file(folder, name, MAX_FILE_BYTES)
            except SnapshotProblem as exc:
                if exc.kind == "missing_file":
                    exc = SnapshotProblem("missing_file", f"{name} was not found in {origin}", name)
                return Snapshot(origin, learner_files[0], {}, problem=exc)
            if not files[name].strip():
                return Snapshot(origin, learner_files[0], {}, problem=SnapshotProblem(
                    "empty_file", f"{name} is empty; write your code in it, or bring the stub back with "
                                  f"`grade reset`", name))
        left_out: list[str] = []
        _walk_dir(folder, "", files, left_out, [len(files), sum(map(len, files.values()))])
        return Snapshot(origin, learner_files[0], files, tuple(left_out))
    finally:
        for fd in reversed(fds):
            os.close(fd)


def find_learner_folder(root: Path, name: str, max_entries: int = 20000) -> tuple[str, ...] | None:
    """The folder (as parts below ``root``) of the shallowest regular file called ``name``
    under ``root``, searched without following links; None when there is none."""
    best: tuple[int, str, tuple[str, ...]] | None = None
    seen = 0
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        seen += len(files) + len(dirs)
        if seen > max_entries:
            break
        if name in files and os.path.isfile(os.path.join(folder, name)) \
                and not os.path.islink(os.path.join(folder, name)):
            rel = Path(folder).relative_to(root).parts
            key = (len(rel), "/".join(rel), rel)
            if best is None or key < best:
                best = key
    return None if best is None else best[2]


def read_submission(root: Path, exercise_dir: str, learner_files: tuple[str, ...]) -> Snapshot:
    """An exercise's files in a checkout: ``exercises/<dir>/`` in a fork of the learners'
    repository, or, without that layout, the folder of the first learner file found."""
    root = Path(root)
    parts = ("exercises", exercise_dir)
    if not (root / "exercises").is_dir() and root.is_dir():
        found = find_learner_folder(root, learner_files[0])
        if found is not None:
            parts = found
    return read_folder(root, parts, learner_files)


# --- reading a git commit ----------------------------------------------------------------

class GitError(RuntimeError):
    pass


def git(repo: Path, *args: str, input: bytes | None = None) -> bytes:
    """Run git on a repository the learner controls: its own hooks, fsmonitor and pagers
    never run, and ownership checks do not stop root from reading a learner's checkout."""
    cmd = ["git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "safe.directory=*",
           "-c", "core.untrackedCache=false", "-C", str(repo), *args]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1",
           "HOME": "/nonexistent", "LC_ALL": "C"}
    try:
        proc = subprocess.run(cmd, input=input, capture_output=True, timeout=GIT_TIMEOUT_S, env=env)
    except FileNotFoundError:
        raise GitError("git is not installed") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} took over {GIT_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        lines = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {args[0]} failed: {lines[-1] if lines else proc.returncode}")
    return proc.stdout


def head_commit(repo: Path) -> str:
    return git(repo, "rev-parse", "--verify", "HEAD^{commit}").decode().strip()


def dirty_paths(repo: Path, limit: int = 20) -> list[str]:
    """Uncommitted changes in a checkout (what committed-only grading leaves out)."""
    try:
        out = git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=normal")
    except GitError:
        return []
    entries = [e for e in out.decode("utf-8", "replace").split("\0") if e]
    return [e[3:] for e in entries[:limit]]


def read_commit(repo: Path, commit: str, exercise_dir: str, learner_files: tuple[str, ...]) -> Snapshot:
    """An exercise's files as committed: ``exercises/<dir>/`` of ``commit``'s tree (or the
    folder of the first learner file found in it), read from git's object database."""
    listing = git(repo, "ls-tree", "-r", "-z", "--full-tree", commit)
    entries = {}  # path -> (mode, sha)
    for item in listing.split(b"\0"):
        if not item:
            continue
        meta, _, path = item.partition(b"\t")
        mode, _, sha = meta.decode().split(" ")
        entries[path.decode("utf-8", "surrogateescape")] = (mode, sha)
    folder = f"exercises/{exercise_dir}"
    if not any(p.startswith(folder + "/") for p in entries):
        named = sorted((p for p in entries if PurePosixPath(p).name == learner_files[0]),
                       key=lambda p: (p.count("/"), p))
        if named:
            folder = str(PurePosixPath(named[0]).parent)
    prefix = "" if folder in ("", ".") else folder + "/"
    origin = f"{repo}@{commit[:12]}:{folder}"
    shown = str(Path(repo) / prefix / learner_files[0])  # where the learner file is in a checkout of it
    wanted = {p[len(prefix):]: v for p, v in entries.items() if p.startswith(prefix)}
    for name in learner_files:
        if name not in wanted:
            return Snapshot(origin, learner_files[0], {}, path=shown, problem=SnapshotProblem(
                "missing_file", f"{name} was not found in {folder} of commit {commit[:12]}", name))
        mode = wanted[name][0]
        if mode == "120000":
            return Snapshot(origin, learner_files[0], {}, path=shown, problem=SnapshotProblem(
                "link", f"{name} is a symbolic link in the commit; commit the file itself, not a link", name))
        if not mode.startswith("100"):
            return Snapshot(origin, learner_files[0], {}, path=shown, problem=SnapshotProblem(
                "not_a_file", f"{name} is not a file in the commit", name))
    order = list(learner_files) + sorted(p for p in wanted if p not in learner_files)
    files: dict[str, bytes] = {}
    left_out: list[str] = []
    total = 0
    sizes = _blob_sizes(repo, [wanted[p][1] for p in order if wanted[p][0].startswith("100")])
    for rel in order:
        mode, sha = wanted[rel]
        parts = PurePosixPath(rel).parts
        if any(part in SKIP_DIRS or part.startswith(".") for part in parts[:-1]):
            continue
        if not mode.startswith("100"):
            left_out.append(f"{rel} ({'a link' if mode == '120000' else 'not a file'})")
            continue
        if rel.endswith((".pyc", ".so", ".pyd", ".dylib")):
            left_out.append(f"{rel} (compiled code)")
            continue
        size = sizes.get(sha, MAX_FILE_BYTES + 1)
        if size > MAX_FILE_BYTES or total + size > MAX_TOTAL_BYTES or len(files) >= MAX_FILES:
            if rel in learner_files:
                return Snapshot(origin, learner_files[0], {}, path=shown, problem=SnapshotProblem(
                    "too_large", f"{rel} is {size} bytes; a learner file may have at most {MAX_FILE_BYTES}", rel))
            left_out.append(f"{rel} (over the size or file limits)")
            continue
        files[rel] = git(repo, "cat-file", "blob", sha)
        total += size
    return Snapshot(origin, learner_files[0], files, tuple(left_out), path=shown)


def _blob_sizes(repo: Path, shas: list[str]) -> dict[str, int]:
    if not shas:
        return {}
    out = git(repo, "cat-file", "--batch-check=%(objectname) %(objectsize)", input="\n".join(shas).encode() + b"\n")
    sizes = {}
    for line in out.decode().splitlines():
        sha, _, size = line.partition(" ")
        if size.isdigit():
            sizes[sha] = int(size)
    return sizes


def single_file(path: Path, as_name: str) -> Snapshot:
    """One file graded as an exercise's learner file ``as_name`` (``grade exercise N --file``);
    the seed and the result's file name come from it."""
    path = Path(os.path.abspath(path))
    try:
        fd = _open_dir(None, str(path.parent))
    except OSError:
        return Snapshot(str(path.parent), as_name, {}, problem=SnapshotProblem(
            "missing_file", f"{path} was not found", str(path)))
    try:
        data = _read_file(fd, path.name, MAX_FILE_BYTES)
    except SnapshotProblem as exc:
        return Snapshot(str(path.parent), as_name, {}, problem=exc)
    finally:
        os.close(fd)
    return from_source(str(path), as_name, data)


def from_source(origin: str, as_name: str, data: bytes, extra: dict[str, bytes] | None = None) -> Snapshot:
    """A snapshot made in memory (a fixture: its base with the mistake appended); ``origin``
    is what results show as the file."""
    files = {as_name: data, **(extra or {})}
    return Snapshot(origin, as_name, files)
