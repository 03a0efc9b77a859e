"""`grade`: a thin click layer over ``grader.runner``, ``grader.hints`` and ``grader.verify``.

Exit codes (also in the README):

    0  graded; every check that ran passed          (verify: the suite is sound)
       `grade ci`, `grade batch`: grading completed, whatever the score
    1  graded; some check failed or scored less    (verify: a problem was found)
       `grade ci --fail-under PCT`: the score is below PCT percent
    2  usage error: unknown exercise, bad option, missing folder
    3  could not grade: broken manifest, unusable hidden checks, an internal grader error
    4  `grade ci`: graded, but the grader failed on some exercise (its result says
       "grader error"; the instructor's JSON holds the traceback)
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

import click
from grader import hidden as hidden_mod
from grader import hints as hints_mod
from grader import runner

from grader.cli_common import (  # noqa: F401 - re-exported: the exit codes are part of the CLI
    EXIT_CANNOT_GRADE,
    EXIT_FAILED,
    EXIT_GRADER_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    GraderCrash,
    _manifest,
    check_numbers,
    course_root,
)


def _hidden_root(course: Path, public_only: bool, hidden: Path | None) -> Path | None:
    if public_only:
        return None
    if hidden is not None:
        return hidden
    default = course / "solutions"
    return default if hidden_mod.holds_hidden_checks(default) else None


def _grade_and_report(numbers, submission, seed, as_json, public_only, hidden, verbose, github, jobs=1,
                      file=None) -> None:
    course = course_root()
    manifest = _manifest(course)
    check_numbers(manifest, numbers)
    sub = Path(submission).resolve() if submission else course
    snapshots = {numbers[0]: _file_snapshot(manifest.get(numbers[0]), course, Path(file))} if file else None
    try:
        run = runner.grade_parallel(manifest, numbers, jobs=jobs, course_root=course, submission_root=sub,
                                    snapshots=snapshots, hidden_root=_hidden_root(course, public_only, hidden),
                                    seed=seed)
    except runner.GradingInterrupted as stop:
        click.echo(f"grade: interrupted ({_signal_name(stop.signum)}); nothing was graded -- run it again", err=True)
        sys.exit(128 + stop.signum)
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
    if github:
        _report_to_github(run, sub)
    ran = [c for e in run.exercises for c in e.checks if c.status != "not_run"]
    sys.exit(EXIT_OK if ran and all(c.passed for c in ran) else EXIT_FAILED)


def _report_to_github(run, repo_root: Path) -> None:
    """The job summary and annotations.  Annotation paths are relative to the workflow's
    workspace (``GITHUB_WORKSPACE``) when the graded checkout lies inside it -- a fork checked
    out under ``submission/`` is annotated as ``submission/exercises/...``."""
    from grader.reports import github as gh

    if os.environ.get("GITHUB_STEP_SUMMARY"):
        gh.write_summary(run, Path(os.environ["GITHUB_STEP_SUMMARY"]))
    workspace = os.environ.get("GITHUB_WORKSPACE")
    root = Path(workspace).resolve() if workspace and _inside(repo_root, Path(workspace)) else repo_root
    for line in gh.annotations(run, root):
        click.echo(line)


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except (ValueError, OSError):
        return False


def _file_snapshot(ex, course: Path, file: Path):
    """``--file``: one file graded as the exercise's learner file.  A fixture that holds only
    its mistake (``base`` in fixture.toml) is graded as base + mistake, built in memory."""
    from grader import submission, verify

    folder = file.resolve().parent
    if (folder / "fixture.toml").is_file():
        source = verify.fixture_source(ex, course, folder)
        if source is not None:
            return submission.from_source(str(file), ex.module_file, source.encode("utf-8"))
    return submission.single_file(file, ex.module_file)


def _signal_name(signum: int) -> str:
    import signal

    try:
        return signal.Signals(signum).name
    except ValueError:
        return str(signum)


_grading_options = [
    click.option("--submission", type=click.Path(exists=True, file_okay=False, path_type=Path),
                 help="Grade another checkout (e.g. a learner's fork) instead of this one."),
    click.option("--seed", type=int, help="Seed for the inputs drawn at grading time (default: derived from your files)."),
    click.option("--json", "as_json", is_flag=True, help="Print machine-readable results."),
    click.option("--public-only", is_flag=True, help="Run the public checks only, as learners' copies do."),
    click.option("--hidden", type=click.Path(exists=True, file_okay=False, path_type=Path),
                 help="Folder holding <exercise dir>/test_hidden.py (default: solutions/)."),
    click.option("-v", "--verbose", is_flag=True, help="Show tracebacks and what your code printed."),
    click.option("--github", is_flag=True,
                 help="GitHub Actions: append a job summary to $GITHUB_STEP_SUMMARY and print ::error annotations."),
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
def exercise_cmd(number, submission, seed, as_json, public_only, hidden, verbose, github, file) -> None:
    """Grade exercise NUMBER."""
    _grade_and_report([number], submission, seed, as_json, public_only, hidden, verbose, github, file=file)


@main.command("all")
@grading_options
@click.option("-j", "--jobs", type=int, default=0, help="Exercises graded at once (default: number of cores).")
def all_cmd(submission, seed, as_json, public_only, hidden, verbose, github, jobs) -> None:
    """Grade every exercise."""
    numbers = [e.number for e in _manifest(course_root()).exercises]
    _grade_and_report(numbers, submission, seed, as_json, public_only, hidden, verbose, github, jobs=jobs or None)


@main.command("ci")
@click.option("--submission", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True,
              help="The checkout to grade (a learner's fork, or a folder of uploaded files).")
@click.option("--hidden", "hidden_source", type=click.Path(exists=True, path_type=Path), required=True,
              help="The course's hidden checks: a folder or a tarball (.tar, .tar.gz, .tgz, .tar.xz).")
@click.option("--exercise", "numbers", type=int, multiple=True, help="Only these exercises (default: all).")
@click.option("--seed", type=int, help="Seed for the inputs drawn at grading time (default: derived from the files).")
@click.option("-j", "--jobs", type=int, default=0, help="Exercises graded at once (default: number of cores).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the grader's own JSON results here.")
@click.option("--instructor", is_flag=True,
              help="Include instructor-only details (hidden checks' measurements, grader tracebacks) in --json.")
@click.option("--gradescope", "gradescope_out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write Gradescope's results.json here.")
@click.option("--junit", "junit_out", type=click.Path(dir_okay=False, path_type=Path), help="Write JUnit XML here.")
@click.option("--github", is_flag=True,
              help="GitHub Actions: append a job summary to $GITHUB_STEP_SUMMARY and print ::error annotations.")
@click.option("--fail-under", type=click.FloatRange(0, 100),
              help="Exit 1 when the score is below this percentage (default: never for a low score).")
@click.option("--label", help="What the results call this submission (default: its git remote and commit, "
                                "or its path).")
@click.option("-q", "--quiet", is_flag=True, help="Print no report (files are still written).")
def ci_cmd(submission, hidden_source, numbers, seed, jobs, json_out, instructor, gradescope_out, junit_out, github,
           fail_under, label, quiet) -> None:
    """Grade a submission with the hidden checks, as the course does (authoritative).

    Exits 0 whenever grading completed, whatever the score (see --fail-under); every
    requested file is written even when grading could not run, with the reason inside.
    """
    from grader import ci
    from grader.manifest import ManifestError, load

    try:
        check_numbers(load(course_root() / "exercises" / "manifest.toml"), numbers)
    except ManifestError:
        pass  # ci.run reports it, and every requested file is still written
    outcome = ci.run(course_root(), submission.resolve(), hidden_source.resolve(), numbers=list(numbers),
                     seed=seed, jobs=jobs or None, label=label)
    outputs = ci.Outputs(json=json_out, instructor=instructor, gradescope=gradescope_out, junit=junit_out)
    _, failed_reports = ci.write_outputs(outcome.run, outputs, submission.resolve())
    for warning in outcome.warnings:
        click.echo(f"grade: warning: {warning}", err=True)
    if github:
        _report_to_github(outcome.run, submission.resolve())
    if not quiet:
        from grader import render

        render.print_run(outcome.run)
    for failure in failed_reports:
        click.echo(f"grade: could not write a report: {failure}", err=True)
    if outcome.interrupted:
        click.echo(f"grade: interrupted ({_signal_name(outcome.interrupted)}): the result files are marked incomplete "
                   f"and carry no score; grade again", err=True)
        sys.exit(128 + outcome.interrupted)
    if failed_reports:
        sys.exit(EXIT_GRADER_ERROR)
    if outcome.problem:
        click.echo(f"grade: could not grade: {outcome.problem}", err=True)
        sys.exit(EXIT_CANNOT_GRADE)
    if outcome.run.grader_errors:
        click.echo(f"grade: the grader failed on exercise(s) "
                   f"{', '.join(str(e.number) for e in outcome.run.grader_errors)}; rerun with --json PATH "
                   f"--instructor for the tracebacks", err=True)
        sys.exit(EXIT_GRADER_ERROR)
    run = outcome.run
    percent = 100.0 * run.score / run.max_score if run.max_score else 0.0
    if fail_under is not None and percent < fail_under:
        click.echo(f"grade: score {run.score}/{run.max_score} ({percent:.1f}%) is below --fail-under {fail_under:g}",
                   err=True)
        sys.exit(EXIT_FAILED)
    sys.exit(EXIT_OK)


@main.command("gradescope-bundle")
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--hidden", "hidden_source", type=click.Path(exists=True, path_type=Path),
              help="The hidden checks to bundle: a folder or a tarball (default: the course's solutions/).")
def gradescope_bundle_cmd(out: Path, hidden_source: Path | None) -> None:
    """Write OUT (a .zip) for a Gradescope programming assignment's autograder."""
    from grader import gradescope, hidden

    course = course_root()
    manifest = _manifest(course)
    try:
        with hidden.open_hidden(hidden_source or course / "solutions") as root:
            entries = gradescope.bundle_entries(course, manifest, root)
    except (hidden.HiddenSourceError, FileNotFoundError) as exc:
        raise GraderCrash(f"could not build the bundle: {exc}") from None
    gradescope.write_bundle(out, entries)
    n_hidden = sum(1 for name in entries if name.startswith("hidden/"))
    click.echo(f"wrote {out}: {len(entries)} files, hidden checks for {n_hidden} exercises, no solutions. "
               f"Upload it as the autograder of a Gradescope programming assignment.")


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


@main.command("release")
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace an earlier release in OUT (OUT/.git is kept).")
@click.option("--replace-any-folder", "replace_any", is_flag=True,
              help="With --force: replace OUT's files even when OUT is not an earlier release.")
def release_cmd(out: Path, force: bool, replace_any: bool) -> None:
    """Write the repository learners fork: stubs, statements, public checks, grader; no solutions."""
    from grader import release

    sys.exit(release.release_command_impl(out, force, course=course_root(), replace_any=replace_any))


@main.command("verify")
@click.argument("exercises", type=int, nargs=-1)
@click.option("--json", "as_json", is_flag=True)
@click.option("-j", "--jobs", type=int, default=0, help="Parallel gradings (default: number of cores).")
@click.option("--exercise", "numbers", type=int, multiple=True, help="Only these exercises (as EXERCISES).")
@click.option("--seeds", type=click.IntRange(min=1), default=1, show_default=True,
              help="Grade every solution and known-wrong fixture at this many seeds; each must hold at all.")
def verify_cmd(exercises: tuple[int, ...], as_json: bool, jobs: int, numbers: tuple[int, ...], seeds: int) -> None:
    """Prove the suite: solutions score full, stubs 0, wrong fixtures and cheats are caught.

    EXERCISES: only these exercise numbers (default: all)."""
    numbers = tuple(exercises) + tuple(numbers)
    from grader import verify

    course = course_root()
    if not hidden_mod.holds_hidden_checks(course / "solutions"):
        raise click.UsageError(
            f"`grade verify` proves the suite with the course's reference solutions, hidden checks and fixtures; "
            f"{course} has none (a learner's copy?). Run it in the course's own repository.")
    manifest = _manifest(course)
    check_numbers(manifest, numbers)
    report = verify.verify(manifest, course_root(), numbers=list(numbers) or None, jobs=jobs or None,
                           progress=None if as_json else click.echo, seeds=seeds)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        verify.print_report(report)
    sys.exit(EXIT_OK if report.ok else EXIT_FAILED)


from grader.cli_batch import batch_cmd, gradebook_group  # noqa: E402 - they import this module's helpers
from grader.cli_compare import compare_cmd  # noqa: E402

main.add_command(batch_cmd)
main.add_command(gradebook_group)
main.add_command(compare_cmd)

if __name__ == "__main__":  # pragma: no cover
    main()
