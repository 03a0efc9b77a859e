"""SOURCE arguments of `grade compare` -> the class's solutions of one exercise.

A SOURCE is either

* a **gradebook** file (written by ``grade batch`` or ``grade gradebook import``): every
  submission's latest grading of the exercise, with its outcome.  The code is found where
  the grading left it: the clone ``grade batch`` made next to the gradebook
  (``grades.repos/``), read at the graded commit, or the graded folder itself.  A result
  imported from elsewhere has no code here: it keeps its outcome, and the report says its
  approach could not be measured;
* a **submission** as ``grade batch`` takes it (a folder, a git repository path or URL,
  ``NAME=SOURCE``; ``grader.course.batch.locate``/``fetch``): its outcome is looked up later
  (gradebook, compare's cache) or graded.

Submissions are identified as the gradebook identifies them (``submission_key``) and
shown only by their label.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from pathlib import Path
from typing import Any

from grader.manifest import Exercise
from grader.results import ExerciseResult


class CompareUsageError(ValueError):
    """A SOURCE or option that cannot be used; the message says why and what to do."""


@dataclasses.dataclass
class Solution:
    label: str  # as the gradebook (or ``grade batch``) labels it
    key: str  # the submission's identity
    root: Path | None  # a checkout holding the exercise's files; None: no code here
    content_hash: str = ""
    result: ExerciseResult | None = None
    outcome_origin: str = ""  # "gradebook", "compare cache", "graded now", or "" (none)
    note: str = ""  # what the report should say about this submission
    graded_hash: str = ""  # the content hash the gradebook recorded with the outcome

    def module_path(self, ex: Exercise) -> Path | None:
        return None if self.root is None else ex.learner_paths(self.root)[0]

    def code(self, ex: Exercise) -> str | None:
        """The learner file's text, read as grading reads it (``read_submission``: never
        through a link, capped), or None."""
        from grader.submission import read_submission

        if self.root is None:
            return None
        snap = read_submission(self.root, ex.dir, ex.files)
        try:
            return snap.source().decode("utf-8") if snap.problem is None else None
        except UnicodeDecodeError:
            return None


@dataclasses.dataclass
class Collected:
    solutions: list[Solution]
    gradebooks: list[Path]
    problems: list[str]  # SOURCEs that could not be used (e.g. a fork that could not be fetched)


def is_gradebook_file(arg: str) -> bool:
    return Path(arg).is_file()


def open_gradebook(path: Path):
    """A gradebook opened read-only in spirit (``create=False``); CompareUsageError when it is not one."""
    from grader.course.gradebook import Gradebook, GradebookError

    try:
        return Gradebook(path, create=False)
    except GradebookError as exc:
        raise CompareUsageError(f"cannot read the gradebook {path}: {exc}") from None


def _at_commit(root: Path, commit: str, ex: Exercise, workdir: Path, owned: bool) -> tuple[Path | None, str]:
    """The exercise's files of ``root`` as they were at ``commit`` -- the snapshot grading
    read (``grader.submission.read_commit``) -- written under ``workdir`` as
    ``exercises/<dir>/``, and a note: (None, why) when the commit cannot be read.  ``root`` is the grader-owned
    clone ``grade batch`` left (``owned``), or else a learner's repository, which is imported
    first (``grader.gitsafe``): git never runs in it, so nothing its configuration names runs."""
    from grader import gitsafe
    from grader.submission import read_commit

    try:
        if owned:
            with gitsafe.Store(root) as store:
                snap = read_commit(store, commit, ex.dir, ex.files)
        else:
            with gitsafe.imported(root) as (store, _):
                snap = read_commit(store, commit, ex.dir, ex.files)
    except gitsafe.GitError as exc:
        return None, f"its commit could not be read ({exc})"
    if snap.problem is not None:
        return None, f"its commit could not be read: {snap.problem.message}"
    return _written(snap, ex, workdir / f"at-{commit[:12]}-{hashlib.sha256(str(root).encode()).hexdigest()[:8]}"), ""


def _written(snap, ex: Exercise, dest: Path) -> Path | None:
    """``dest`` holding ``snap``'s files as ``exercises/<dir>/`` (written once; names checked
    and no link followed: ``Snapshot.write_to``); None for a snapshot with a problem."""
    if snap.problem is not None:
        return None
    if not dest.exists():
        folder = dest / "exercises" / ex.dir
        folder.mkdir(parents=True)
        snap.write_to(folder)
    return dest


def clone_dir(gradebook: Path, label: str, key: str) -> Path:
    """Where ``grade batch`` keeps a git submission's objects (``grader.course.batch.clone_path``)."""
    from grader.course import batch

    return batch.clone_path(batch.repo_cache(gradebook), label, key)


def _code_root(row: dict[str, Any], gradebook: Path, ex: Exercise, workdir: Path) -> tuple[Path | None, str]:
    """Where a graded submission's files are, and a note for the report."""
    from grader.course.gradebook import split_submission

    what, commit = row["source"], row["commit"]
    if not commit:
        what, commit = split_submission(what)
    candidates = [(clone_dir(gradebook, row["submission"], row["submission_key"]), True)]
    if what and not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://|^[\w.-]+@[\w.-]+:", what):
        candidates.append((Path(what), False))
    from grader import gitsafe

    why = ""
    for root, owned in candidates:
        if not root.is_dir():
            continue
        if commit and gitsafe.find_repository(root)[0] is not None:
            at, why = _at_commit(root, commit, ex, workdir, owned)
            if at is None:
                continue
            return at, ""
        return root, ""
    return None, why or "its code is not on this machine (graded elsewhere): outcome only"


def _unique_labels(solutions: list[Solution]) -> None:
    seen: dict[str, int] = {}
    for s in solutions:
        n = seen.get(s.label, 0) + 1
        seen[s.label] = n
        if n > 1:
            s.label = f"{s.label} ({n})"


def from_gradebook(path: Path, ex: Exercise, workdir: Path) -> list[Solution]:
    """Every submission's latest grading of ``ex`` in the gradebook at ``path``."""
    from grader.course import batch

    with open_gradebook(path) as book:
        rows = [r for r in book.gradings(private=True) if r["exercise"] == ex.number]
    out = []
    for row in rows:
        root, note = _code_root(row, path, ex, workdir)
        try:
            result = ExerciseResult.from_dict(row["result"])
        except Exception as exc:  # noqa: BLE001 - one unreadable grading is that submission's note
            result, note = None, f"its gradebook result could not be read ({type(exc).__name__}): graded again"
        sol = Solution(row["submission"], row["submission_key"], root, result=result,
                       outcome_origin="gradebook" if result is not None else "", note=note,
                       graded_hash=row["content_hash"])
        if root is not None:
            sol.content_hash = batch.content_hash(ex, root)
            if sol.graded_hash and sol.graded_hash != sol.content_hash:
                sol.note = "its files changed since this grading: the outcome is of an earlier version"
        out.append(sol)
    return out


def from_submissions(args: list[str], ex: Exercise, cache: Path,
                     workdir: Path | None = None) -> tuple[list[Solution], list[str]]:
    """Folders and git repositories, fetched as ``grade batch`` fetches them; a git
    submission's code is the snapshot of its commit that grading reads, written under
    ``workdir``."""
    from grader.course import batch

    out, problems = [], []
    for arg in args:
        try:
            spec = batch.locate(arg)
        except batch.SourceError as exc:
            raise CompareUsageError(str(exc)) from None
        try:
            sub = batch.fetch(spec, cache)
        except batch.FetchError as exc:
            problems.append(f"could not fetch {spec.label}: {exc}")
            continue
        if sub.commit:
            snap = batch.snapshot_for(sub, ex)
            where = (workdir or cache) / f"at-{sub.commit[:12]}-{hashlib.sha256(sub.key.encode()).hexdigest()[:8]}"
            out.append(Solution(sub.label, sub.key, _written(snap, ex, where), content_hash=snap.digest()))
        else:
            out.append(Solution(sub.label, sub.key, sub.root, content_hash=batch.content_hash(ex, sub.root)))
    return out, problems


def collect(args: list[str], ex: Exercise, *, gradebook: Path | None, workdir: Path) -> Collected:
    """Every SOURCE's solutions of ``ex``; a submission given twice (a gradebook and its
    folder) is kept once, with the folder's files."""
    if not args:
        raise CompareUsageError("give at least one SOURCE: a gradebook file, or submission folders / git forks")
    books = [Path(a) for a in args if is_gradebook_file(a)]
    folders = [a for a in args if not is_gradebook_file(a)]
    solutions: dict[str, Solution] = {}
    for book in books:
        for sol in from_gradebook(book, ex, workdir):
            solutions.setdefault(sol.key, sol)
    cache_book = gradebook or (books[0] if books else None)
    from grader.course import batch

    cache = batch.repo_cache(cache_book) if cache_book else workdir / "repos"
    found, problems = from_submissions(folders, ex, cache, workdir)
    for sol in found:
        known = solutions.get(sol.key)
        if known is not None and known.result is not None and known.graded_hash in ("", sol.content_hash):
            sol.result, sol.outcome_origin, sol.graded_hash = known.result, known.outcome_origin, known.graded_hash
        solutions[sol.key] = sol
    result = list(solutions.values())
    _unique_labels(result)
    return Collected(result, books, problems)


def checks_digest(ex: Exercise, course: Path, hidden: Path) -> str:
    """What decides the exercise's verdicts: its manifest entry and its check files."""
    h = hashlib.sha256(b"compare-checks-v1\0")
    h.update(repr((ex.number, ex.files, ex.timeout_s, ex.memory_mb, ex.cpu_devices, ex.checks)).encode())
    for path in (ex.public_checks(course), ex.hidden_checks(hidden)):
        try:
            h.update(path.read_bytes())
        except OSError:
            h.update(b"<missing>")
    return h.hexdigest()[:32]
