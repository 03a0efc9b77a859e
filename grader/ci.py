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

from grader import batch, hidden, runner
from grader.manifest import ManifestError, load
from grader.results import RunResult
from grader.sandbox import user as sandbox_user


@dataclasses.dataclass(frozen=True)
class Outcome:
    run: RunResult
    problem: str = ""  # set when nothing could be graded: what the course must fix


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
    return dataclasses.replace(outcome, run=dataclasses.replace(outcome.run, submission=label))


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
        with hidden.open_hidden(hidden_source) as hidden_root:
            result = runner.grade_parallel(manifest, [e.number for e in exercises], jobs=jobs, course_root=course,
                                           submission_root=submission, hidden_root=hidden_root, seed=seed)
        return Outcome(result)
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


def write_outputs(result: RunResult, outputs: Outputs, repo_root: Path) -> list[Path]:
    """Write every requested report; each is a pure function of ``result``."""
    import json

    from grader.reports import gradescope, junit

    written = []

    def put(path: Path | None, text: str) -> None:
        if path is None:
            return
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)

    put(outputs.json, json.dumps(result.to_dict(private=outputs.instructor), indent=2) + "\n")
    put(outputs.gradescope, gradescope.to_gradescope_json(result))
    put(outputs.junit, junit.to_junit_xml(result))
    return written

