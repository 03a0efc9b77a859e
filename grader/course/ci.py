"""`grade ci`: authoritative grading of one submission with the course's hidden checks.

Used by the instructor workflow (one job per fork), by Gradescope's ``run_autograder`` and
by anyone grading a single checkout.  Its contract is that a result always exists: when
the hidden checks cannot be opened, or the grader crashes on an exercise, the result says
so ("grader error", the traceback kept for the instructor) and every requested report is
still written.  ``cli.ci_cmd`` turns the ``Outcome`` into an exit status.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from grader import runner
from grader.course import batch, hidden
from grader.manifest import ManifestError, load
from grader.results import RunResult
from grader.sandbox import user as sandbox_user
from grader import gitsafe
from grader.gitsafe import GitError
from grader.submission import changed_files, read_commit, read_submission


@dataclasses.dataclass(frozen=True)
class Outcome:
    run: RunResult
    problem: str = ""  # set when nothing could be graded: what the course must fix
    interrupted: int = 0  # the signal that stopped grading (the run is then incomplete)
    warnings: tuple[str, ...] = ()  # e.g. uncommitted changes that were not graded


@dataclasses.dataclass(frozen=True)
class Outputs:
    json: Path | None = None
    instructor: bool = False  # include private fields in the JSON
    gradescope: Path | None = None
    junit: Path | None = None


def run(course: Path, submission: Path, hidden_source: Path, *, numbers: list[int] | None = None,
        seed: int | None = None, jobs: int | None = None, label: str | None = None) -> Outcome:
    outcome = _run(course, submission, hidden_source, numbers, seed, jobs)
    label = label or batch.describe_checkout(submission)
    result = dataclasses.replace(outcome.run, submission=label, submission_id=submission_identity(submission))
    return dataclasses.replace(outcome, run=result)


def submission_identity(folder: Path) -> str:
    """What a checkout is, beyond its label: its repository's URL (credentials stripped) and
    its folder.  Two forks cloned from one origin into two folders differ; the same fork
    graded again at another commit does not.  The URL is read from the repository's config
    as text (``gitsafe.origin_url``): git never runs there."""
    import hashlib

    git_dir, _ = gitsafe.find_repository(folder)
    origin = batch.without_credentials(gitsafe.origin_url(git_dir)) if git_dir is not None else ""
    return hashlib.sha256(f"{origin}|{folder.resolve()}".encode()).hexdigest()[:16]


def committed_snapshots(manifest, exercises, submission: Path) -> tuple[dict, tuple[str, ...]]:
    """For a git repository: each exercise's files as committed at HEAD (``grade ci`` and
    ``grade batch`` grade what was committed), read from a grader-owned copy of its objects
    (``gitsafe.imported``), and a warning naming the files on disk that differ from the
    commit.  For a folder that is not a repository (or whose ``.git`` is a link or a pointer
    file, which is never followed): nothing (its files are read as they are)."""
    git_dir, why = gitsafe.find_repository(submission)
    if git_dir is None:
        return {}, ((f"the submission's files are graded as they are on disk: {why}",) if why else ())
    try:
        with gitsafe.imported(submission, shown_as=str(submission)) as (store, commit):
            snaps = {ex.number: read_commit(store, commit, ex.dir, ex.files) for ex in exercises}
    except GitError as exc:
        if "no commits" in str(exc):
            return {}, ("the submission is a git repository without commits: its files are graded as they are",)
        raise
    changes = []
    if git_dir != submission:  # a checkout, not a bare repository: what its work tree holds beyond the commit
        for ex in (ex for ex in exercises if snaps[ex.number].problem is None):
            on_disk = read_submission(submission, ex.dir, ex.files)
            changes += [f"{ex.dir}/{name}" for name in changed_files(snaps[ex.number], on_disk)]
    warnings = ()
    if changes:
        warnings = (f"{len(changes)} file(s) of the exercises differ from the last commit and are not graded (e.g. "
                    f"{changes[0]}): a git repository is graded at its last commit ({commit[:12]})",)
    return snaps, warnings


def _run(course: Path, submission: Path, hidden_source: Path, numbers, seed, jobs) -> Outcome:
    try:
        manifest = load(course / "exercises" / "manifest.toml")
    except ManifestError as exc:
        return _nothing_graded(submission, f"the exercise manifest is broken: {exc}")
    try:
        exercises = [manifest.get(n) for n in numbers] if numbers else list(manifest.exercises)
    except KeyError as exc:
        return _nothing_graded(submission, str(exc.args[0]))
    if sandbox_user.isolating():
        sandbox_user.protect([hidden_source])
    try:
        snapshots, warnings = committed_snapshots(manifest, exercises, submission)
    except GitError as exc:
        snapshots, warnings = {}, (f"the submission's commit could not be read ({exc}); its files are graded as they are",)
    try:
        with hidden.open_hidden(hidden_source) as hidden_root:
            result = runner.grade_parallel(manifest, [e.number for e in exercises], jobs=jobs, course_root=course,
                                           submission_root=submission, snapshots=snapshots,
                                           hidden_root=hidden_root, seed=seed)
        return Outcome(result, warnings=warnings)
    except runner.GradingInterrupted as stop:
        return Outcome(stop.partial, interrupted=stop.signum, warnings=warnings)
    except hidden.HiddenSourceError as exc:
        problem, cause = str(exc), exc
    except Exception as exc:  # the grader's own bug: still a result for every exercise
        problem, cause = "", exc
    return Outcome(runner.error_run(exercises, submission, seed=seed, cause=cause,
                                    error="the course's hidden checks could not be loaded" if problem else ""),
                   problem=problem)


def _nothing_graded(submission: Path, problem: str) -> Outcome:
    return Outcome(runner.run_result((), submission=submission,
                                     error="the grader could not run (not your code's fault; "
                                           "your instructor has been told)"),
                   problem=problem)


def write_outputs(result: RunResult, outputs: Outputs, repo_root: Path) -> tuple[list[Path], list[str]]:
    """Write every requested report; each is a pure function of ``result``.

    Each writer runs on its own: one that fails (a bug, a full disk) never stops the others,
    and a file is replaced atomically, so no reader ever sees half of one.  Returns (the
    files written, what failed)."""
    import json

    from grader.course import result_file
    from grader.reports import gradescope, junit

    writers = [  # the grader's JSON is signed when the course keeps a result key (GRADER_RESULT_KEY)
        (outputs.json, lambda: json.dumps(result_file.sign(result.to_dict(private=outputs.instructor)), indent=2)
         + "\n"),
        (outputs.gradescope, lambda: gradescope.to_gradescope_json(result)),
        (outputs.junit, lambda: junit.to_junit_xml(result)),
    ]
    written, failed = [], []
    for path, render in writers:
        if path is None:
            continue
        try:
            _write_atomically(Path(path), render())
            written.append(Path(path))
        except Exception as exc:  # noqa: BLE001 - one report's failure must not cost the others
            failed.append(f"{path}: {type(exc).__name__}: {exc}")
    return written, failed


def _write_atomically(path: Path, text: str) -> None:
    import os
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise

