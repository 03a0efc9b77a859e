"""`grade`: a thin click layer.  The learner's commands are in ``grader.learner.cli``, batch
grading in ``grader.course.cli``, comparison in ``grader.compare.cli``; this module holds the
group and the course's own commands (ci, release, gradescope-bundle, verify).

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
from pathlib import Path

import click
from grader import __version__
from grader import runner
from grader.course import hidden as hidden_mod

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


def report_to_github(run, repo_root: Path) -> None:
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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="grade",
                      message=f"%(prog)s %(version)s (JAX {runner.jax_version()}, Python {sys.version.split()[0]})")
def main() -> None:
    """Grade the JAX/XLA exercises: `grade list`, `grade exercise N`, `grade hint N`, `grade watch`."""


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
    from grader.course import ci
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
        report_to_github(outcome.run, submission.resolve())
    if not quiet:
        from grader import render

        render.print_run(outcome.run)
    for failure in failed_reports:
        click.echo(f"grade: could not write a report: {failure}", err=True)
    if outcome.interrupted:
        from grader.learner.cli import signal_name

        click.echo(f"grade: interrupted ({signal_name(outcome.interrupted)}): the result files are marked incomplete "
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
    from grader.course import gradescope, hidden

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


@main.command("release")
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace an earlier release in OUT (OUT/.git is kept).")
@click.option("--replace-any-folder", "replace_any", is_flag=True,
              help="With --force: replace OUT's files even when OUT is not an earlier release.")
def release_cmd(out: Path, force: bool, replace_any: bool) -> None:
    """Write the repository learners fork: stubs, statements, public checks, grader; no solutions."""
    from grader.course import release

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
    from grader.course import verify

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


from grader.course.cli import batch_cmd, gradebook_group  # noqa: E402 - they import this module's helpers
from grader.compare.cli import class_cmd, compare_cmd  # noqa: E402
from grader.learner.cli import COMMANDS as LEARNER_COMMANDS  # noqa: E402

for _command in (*LEARNER_COMMANDS, batch_cmd, gradebook_group, compare_cmd, class_cmd):
    main.add_command(_command)

if __name__ == "__main__":  # pragma: no cover
    main()
