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
  a learner grades while working).  ``read_commit`` reads a git commit's trees and blobs
  raw from a grader-owned copy of the repository's objects (``grader.gitsafe``: git never
  runs in the learner's repository), where links are entries of mode 120000 and never
  touch the disk; ``grade ci`` and ``grade batch`` grade a repository at its HEAD commit
  this way (see ``grader.course.batch``).
* **Names are judged before they are used** (``grader.safepath``).  A tree entry that
  would leave its folder or that git itself refuses (absolute, ``..``, ``.git``, ``/``
  inside, a duplicate) refuses the exercise (``bad_commit``); a file whose name has control
  or invisible characters is left out, named escaped.  ``Snapshot`` re-checks every name
  and ``write_to`` creates files only below its folder, never through a link.

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
from pathlib import Path

from grader.safepath import problem_in_name, shown

MAX_FILES, MAX_FILE_BYTES, MAX_TOTAL_BYTES = 200, 4 << 20, 32 << 20
SKIP_DIRS = frozenset({".git", "__pycache__", ".venv", "venv", "node_modules", ".ipynb_checkpoints"})


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

    def __post_init__(self):
        from grader.safepath import check_relpath

        for name in (self.module_file, *self.files):  # every source filters names; this is the backstop
            check_relpath(name)

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
        path there.  Each name is checked again and each file created exclusively, every
        folder on the way opened without following a link (``safepath.write_beneath``):
        nothing can land outside ``dest``."""
        from grader.safepath import safe_join, write_beneath

        for name, data in sorted(self.files.items()):
            write_beneath(dest, name, data)
        return safe_join(dest, self.module_file)


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
        if problem_in_name(entry.name) is not None:  # control characters, not UTF-8: never shown or copied as is
            left_out.append(f"{shown(rel)} (a name with control or invisible characters)")
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

#: Bounds on what one snapshot reads of a commit's trees (a hostile tree may be deep or wide).
MAX_TREE_DEPTH, MAX_TREE_ENTRIES, MAX_TREE_BYTES = 16, 20_000, 8 << 20


class _RefusedTree(Exception):
    """A tree the grader read holds a name no honest commit has (``safepath``)."""


def read_commit(repo: "gitsafe.Store | Path", commit: str, exercise_dir: str,
                learner_files: tuple[str, ...]) -> Snapshot:
    """An exercise's files as committed: ``exercises/<dir>/`` of ``commit``'s tree (or the
    folder of the first learner file found in it), read from git's objects.

    ``repo`` is a grader-owned ``gitsafe.Store``; a path (a learner's repository) is first
    imported into a temporary one (``gitsafe.imported``): git never runs in it.  Every tree
    on the way and in the folder is parsed here and every entry's name judged
    (``grader.safepath``): a name that would leave the folder or that git itself refuses
    (``..``, ``/``, ``.git``, a duplicate) refuses the exercise with a ``bad_commit``
    problem before anything is written; an unprintable name is left out.  Trees are read to
    ``MAX_TREE_DEPTH`` levels and ``MAX_TREE_ENTRIES`` entries at most."""
    from grader import gitsafe

    if not isinstance(repo, gitsafe.Store):
        with gitsafe.imported(Path(repo)) as (store, _):
            snap = read_commit(store, commit, exercise_dir, learner_files)
        return snap
    try:
        return _read_commit(repo, commit, exercise_dir, learner_files)
    except _RefusedTree as exc:
        origin = f"{repo.shown_as}@{commit[:12]}"
        return Snapshot(origin, learner_files[0], {}, path=str(Path(repo.shown_as) / learner_files[0]),
                        problem=SnapshotProblem("bad_commit", str(exc), learner_files[0]))


class _TreeReader:
    def __init__(self, store, commit: str):
        self.store, self.commit = store, commit
        self.hash_len = 32 if len(commit) == 64 else 20
        self.entries = self.bytes = 0

    def read(self, sha: str, where: str) -> list[tuple[str, str, str]]:
        """The entries of tree ``sha`` (at ``where``), every name judged."""
        from grader import gitsafe
        from grader.safepath import STRUCTURAL

        data = self.store.tree(sha, MAX_TREE_BYTES - self.bytes)
        if data is None:
            raise _RefusedTree(f"the folder {shown(where) or '/'} of commit {self.commit[:12]} could not be read "
                               f"(missing, or over {MAX_TREE_BYTES >> 20} MiB of folders)")
        self.bytes += len(data)
        try:
            entries = gitsafe.parse_tree(data, self.hash_len)
        except gitsafe.GitError:
            raise _RefusedTree(f"the folder {shown(where) or '/'} of commit {self.commit[:12]} is malformed") from None
        seen = set()
        for mode, name, _ in entries:
            problem = problem_in_name(name)
            if problem is not None and problem[0] == STRUCTURAL:
                raise _RefusedTree(
                    f"commit {self.commit[:12]} holds an entry named {shown(name)!r} in {shown(where) or 'its top folder'}"
                    f": {problem[1]}.  Git itself refuses such names (git fsck), so the grader reads nothing of this "
                    f"exercise from that commit: make it with plain git commands")
            if name in seen:
                raise _RefusedTree(f"commit {self.commit[:12]} lists {shown(name)!r} twice in "
                                   f"{shown(where) or 'its top folder'}; git itself refuses such trees (git fsck): "
                                   f"make the commit with plain git commands")
            seen.add(name)
            if not (mode.startswith("100") or mode in ("40000", "120000", "160000")):
                raise _RefusedTree(f"commit {self.commit[:12]} holds {shown(name)!r} with an unknown mode {mode!r}")
        self.entries += len(entries)
        return entries


def _read_commit(store, commit: str, exercise_dir: str, learner_files: tuple[str, ...]) -> Snapshot:
    got = store.read(commit, 1 << 20)
    if got is None or got[0] != "commit" or not got[2].startswith(b"tree "):
        raise _RefusedTree(f"{commit[:12]} is not a commit of the repository")
    trees = _TreeReader(store, commit)
    top = got[2][5:5 + 2 * trees.hash_len + 1].strip().decode("ascii", "replace")
    if len(top) != 2 * trees.hash_len or any(c not in "0123456789abcdef" for c in top):
        raise _RefusedTree(f"commit {commit[:12]} is malformed (its tree line)")

    def child_tree(entries, name):
        return next((sha for mode, n, sha in entries if n == name and mode == "40000"), None)

    folder, folder_sha = f"exercises/{exercise_dir}", None
    root = trees.read(top, "")
    sha = child_tree(root, "exercises")
    if sha is not None:
        folder_sha = child_tree(trees.read(sha, "exercises"), exercise_dir)
    if folder_sha is None:  # no repository layout: the shallowest folder holding the learner's file
        found = _search(trees, top, learner_files[0])
        if found is not None:
            folder, folder_sha = found
    prefix = "" if folder in ("", ".") else folder + "/"
    origin = f"{store.shown_as}@{commit[:12]}:{folder}"
    shown_path = str(Path(store.shown_as) / prefix / learner_files[0])  # where the learner file is in a checkout
    wanted, left_out = _collect(trees, folder_sha, folder) if folder_sha is not None else ({}, [])
    for name in learner_files:
        if name not in wanted:
            return Snapshot(origin, learner_files[0], {}, path=shown_path, problem=SnapshotProblem(
                "missing_file", f"{name} was not found in {shown(folder) or 'the top folder'} of commit {commit[:12]}", name))
        mode = wanted[name][0]
        if mode == "120000":
            return Snapshot(origin, learner_files[0], {}, path=shown_path, problem=SnapshotProblem(
                "link", f"{name} is a symbolic link in the commit; commit the file itself, not a link", name))
        if not mode.startswith("100"):
            return Snapshot(origin, learner_files[0], {}, path=shown_path, problem=SnapshotProblem(
                "not_a_file", f"{name} is not a file in the commit", name))
    order = list(learner_files) + sorted(p for p in wanted if p not in learner_files)
    files: dict[str, bytes] = {}
    total = 0
    for rel in order:
        mode, sha = wanted[rel]
        if any(problem_in_name(part) for part in rel.split("/")):  # unprintable: never shown or written as is
            left_out.append(f"{shown(rel)} (a name with control or invisible characters)")
            continue
        if not mode.startswith("100"):
            left_out.append(f"{rel} ({'a link' if mode == '120000' else 'not a file'})")
            continue
        if rel.endswith((".pyc", ".so", ".pyd", ".dylib")):
            left_out.append(f"{rel} (compiled code)")
            continue
        room = min(MAX_FILE_BYTES, MAX_TOTAL_BYTES - total)
        blob = store.read(sha, room) if len(files) < MAX_FILES else None
        if blob is None or blob[2] is None or blob[0] != "blob":
            if rel in learner_files:
                size = f"{blob[1]} bytes" if blob is not None else "missing from the repository (a clone leaves " \
                                                                    "files over the limit on the server)"
                return Snapshot(origin, learner_files[0], {}, path=shown_path, problem=SnapshotProblem(
                    "too_large", f"{rel} could not be read from the commit ({size}); a learner file may have at "
                                 f"most {MAX_FILE_BYTES} bytes", rel))
            left_out.append(f"{rel} (over the size or file limits)")
            continue
        files[rel] = blob[2]
        total += len(blob[2])
    return Snapshot(origin, learner_files[0], files, tuple(left_out), path=shown_path)


def _search(trees: _TreeReader, top: str, name: str) -> tuple[str, str] | None:
    """(folder path, tree sha) of the shallowest folder holding an entry ``name`` (the first
    in path order at that depth), searched breadth first without entering ``SKIP_DIRS``
    or hidden folders, within the tree bounds."""
    level = [("", top)]
    for _ in range(MAX_TREE_DEPTH):
        hits, below = [], []
        for path, sha in level:
            if trees.entries > MAX_TREE_ENTRIES:
                return None
            for mode, entry, child in trees.read(sha, path):
                if mode == "40000":
                    if entry not in SKIP_DIRS and not entry.startswith(".") and problem_in_name(entry) is None:
                        below.append((f"{path}/{entry}" if path else entry, child))
                elif entry == name:
                    hits.append((path, sha))
        if hits:
            return min(hits)
        level = below
    return None


def _collect(trees: _TreeReader, sha: str, folder: str) -> tuple[dict[str, tuple[str, str]], list[str]]:
    """Every non-folder entry below the folder tree ``sha``, as relative path -> (mode, sha),
    hidden folders and ``SKIP_DIRS`` not entered; what the bounds cut is listed."""
    wanted: dict[str, tuple[str, str]] = {}
    left_out: list[str] = []
    stack = [("", sha, 0)]
    while stack:
        rel, tree_sha, depth = stack.pop()
        if depth > MAX_TREE_DEPTH or trees.entries > MAX_TREE_ENTRIES:
            left_out.append(f"{shown(rel) or '.'}/ (deeper or larger than the grader reads)")
            continue
        for mode, name, child in trees.read(tree_sha, f"{folder}/{rel}".strip("/")):
            path = f"{rel}/{name}" if rel else name
            if mode == "40000":
                if name not in SKIP_DIRS and not name.startswith("."):
                    stack.append((path, child, depth + 1))
            else:
                wanted[path] = (mode, child)
    return wanted, left_out


def changed_files(committed: Snapshot, on_disk: Snapshot) -> list[str]:
    """The files of an exercise's folder that differ between its commit and the disk
    (added, changed or removed), escaped for people: what ``grade ci``/``grade batch``
    warn about, from files the grader read itself (never ``git status`` in the learner's
    checkout, which would run the filters its configuration names)."""
    names = set(committed.files) | set(on_disk.files)
    return [shown(n) for n in sorted(names) if committed.files.get(n) != on_disk.files.get(n)]


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
