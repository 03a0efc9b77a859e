"""`grade`: a thin click layer over ``grader.runner``, ``grader.hints`` and ``grader.verify``.

Exit codes (also in the README):

    0  graded; every check that ran passed          (verify: the suite is sound)
    1  graded; some check failed or scored less    (verify: a problem was found)
    2  usage error: unknown exercise, bad option, missing folder
    3  could not grade: broken manifest or an internal grader error
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

import click
from grader import hints as hints_mod
from grader import runner
from grader.manifest import ManifestError, load

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CANNOT_GRADE = 0, 1, 2, 3


def course_root() -> Path:
    """The course: manifest, public checks, and (by default) solutions/ with the hidden checks.

    The checkout the grader is installed from, unless GRADER_COURSE names another.
    """
    return Path(os.environ.get("GRADER_COURSE") or Path(__file__).resolve().parents[1]).resolve()


class GraderCrash(click.ClickException):
    exit_code = EXIT_CANNOT_GRADE


def _manifest(course: Path):
    try:
        return load(course / "exercises" / "manifest.toml")
    except ManifestError as exc:
        raise GraderCrash(f"the exercise manifest is broken: {exc}") from None


def _hidden_root(course: Path, public_only: bool, hidden: Path | None) -> Path | None:
    if public_only:
        return None
    if hidden is not None:
        return hidden
    default = course / "solutions"
    return default if any(default.glob("*/test_hidden.py")) else None


def _grade_and_report(numbers, submission, seed, as_json, public_only, hidden, verbose, jobs=1, file=None) -> None:
    course = course_root()
    manifest = _manifest(course)
    for n in numbers:
        try:
            manifest.get(n)
        except KeyError as exc:
            raise click.UsageError(str(exc.args[0])) from None
    sub = Path(submission).resolve() if submission else course
    if file is not None:
        file = _materialize_fixture(manifest.get(numbers[0]), course, Path(file))
    try:
        run = runner.grade_parallel(manifest, numbers, jobs=jobs, course_root=course, submission_root=sub,
                                    module_overrides={numbers[0]: file} if file else None,
                                    hidden_root=_hidden_root(course, public_only, hidden), seed=seed)
    except Exception as exc:  # a bug in the grader, not in the submission
        if verbose:
            traceback.print_exc(file=sys.stderr)
        raise GraderCrash(f"internal grader error ({type(exc).__name__}: {exc}); please report it "
                          f"with the output of the same command run with -v") from None
    from grader import render  # rich loads while nothing waits on it

    if as_json:
        click.echo(render.to_json(run))
    else:
        render.print_run(run, verbose=verbose)
    ran = [c for e in run.exercises for c in e.checks if c.status != "not_run"]
    sys.exit(EXIT_OK if ran and all(c.passed for c in ran) else EXIT_FAILED)


def _materialize_fixture(ex, course: Path, file: Path) -> Path:
    """A fixture that holds only its mistake (``base`` in fixture.toml) is graded as base + mistake."""
    from grader import verify

    folder = file.resolve().parent
    if not (folder / "fixture.toml").is_file():
        return file
    source = verify.fixture_source(ex, course, folder)
    if source is None:
        return file
    import tempfile

    out = Path(tempfile.gettempdir()) / f"grade-fixture-{ex.dir}-{folder.name}" / ex.module_file
    out.parent.mkdir(exist_ok=True)
    out.write_text(source, encoding="utf-8")
    return out


_grading_options = [
    click.option("--submission", type=click.Path(exists=True, file_okay=False, path_type=Path),
                 help="Grade another checkout (e.g. a learner's fork) instead of this one."),
    click.option("--seed", type=int, help="Seed for the inputs drawn at grading time (default: derived from your files)."),
    click.option("--json", "as_json", is_flag=True, help="Print machine-readable results."),
    click.option("--public-only", is_flag=True, help="Run the public checks only, as learners' copies do."),
    click.option("--hidden", type=click.Path(exists=True, file_okay=False, path_type=Path),
                 help="Folder holding <exercise dir>/test_hidden.py (default: solutions/)."),
    click.option("-v", "--verbose", is_flag=True, help="Show tracebacks and what your code printed."),
]


def grading_options(f):
    for opt in reversed(_grading_options):
        f = opt(f)
    return f


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Grade the JAX/XLA exercises: `grade list`, `grade exercise N`, `grade hint N`."""


@main.command("list")
@click.option("--json", "as_json", is_flag=True)
def list_cmd(as_json: bool) -> None:
    """List the exercises."""
    manifest = _manifest(course_root())
    rows = [{"number": e.number, "slug": e.slug, "title": e.title,
             "files": [f"exercises/{e.dir}/{f}" for f in e.files], "max_score": e.max_score}
            for e in manifest.exercises]
    if as_json:
        click.echo(json.dumps({"format_version": 1, "exercises": rows}, indent=2))
        return
    for r in rows:
        click.echo(f"{r['number']:>2}  {r['title']:<34} {', '.join(r['files'])}  ({r['max_score']} points)")


@main.command("exercise")
@click.argument("number", type=int)
@grading_options
@click.option("--file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Grade this file as the exercise's learner file (e.g. a fixture, or one learner's file).")
def exercise_cmd(number, submission, seed, as_json, public_only, hidden, verbose, file) -> None:
    """Grade exercise NUMBER."""
    _grade_and_report([number], submission, seed, as_json, public_only, hidden, verbose, file=file)


@main.command("all")
@grading_options
@click.option("-j", "--jobs", type=int, default=0, help="Exercises graded at once (default: number of cores).")
def all_cmd(submission, seed, as_json, public_only, hidden, verbose, jobs) -> None:
    """Grade every exercise."""
    numbers = [e.number for e in _manifest(course_root()).exercises]
    _grade_and_report(numbers, submission, seed, as_json, public_only, hidden, verbose, jobs=jobs or None)


@main.command("hint")
@click.argument("number", type=int)
@click.option("--all", "show_all", is_flag=True, help="Show every hint at once.")
@click.option("--reset", is_flag=True, help="Start this exercise's hints from the first again.")
@click.option("--submission", type=click.Path(exists=True, file_okay=False, path_type=Path))
def hint_cmd(number: int, show_all: bool, reset: bool, submission: Path | None) -> None:
    """Show the next hint for exercise NUMBER (one more each call)."""
    manifest = _manifest(course_root())
    try:
        ex = manifest.get(number)
    except KeyError as exc:
        raise click.UsageError(str(exc.args[0])) from None
    state = hints_mod.HintState(Path(submission or course_root()) / hints_mod.STATE_FILE)
    if reset:
        state.reset(number)
        click.echo(f"Hints for exercise {number} start from the first again.")
        return
    shown = ex.hints if show_all else ex.hints[: state.next(number, len(ex.hints))]
    for i, text in enumerate(shown, 1):
        click.echo(f"Hint {i}/{len(ex.hints)} for exercise {number} ({ex.title}):\n  {text}\n")
    if not show_all and len(shown) == len(ex.hints):
        click.echo("That was the last hint. `grade hint %d --reset` starts again." % number)


@main.command("verify")
@click.option("--json", "as_json", is_flag=True)
@click.option("-j", "--jobs", type=int, default=0, help="Parallel gradings (default: number of cores).")
@click.option("--exercise", "numbers", type=int, multiple=True, help="Only these exercises.")
def verify_cmd(as_json: bool, jobs: int, numbers: tuple[int, ...]) -> None:
    """Prove the suite: solutions score full, stubs 0, wrong fixtures and cheats are caught."""
    from grader import verify

    manifest = _manifest(course_root())
    report = verify.verify(manifest, course_root(), numbers=list(numbers) or None, jobs=jobs or None,
                           progress=None if as_json else click.echo)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        verify.print_report(report)
    sys.exit(EXIT_OK if report.ok else EXIT_FAILED)


if __name__ == "__main__":  # pragma: no cover
    main()
