"""`grade batch` and `grade gradebook`: the click layer over ``grader.course.batch`` and ``grader.course.gradebook``.

Kept light to import (no JAX, no pytest): grading happens in ``grader.course.batch``'s worker
processes.  Exit statuses:

    0    the batch completed, whatever the scores (export/import: done)
    2    usage error: bad option, unknown exercise, a SUBMISSION that names nothing,
         an unreadable or malformed result file, or one this grader would not have
         written for this course (``grader.course.result_file``)
    3    could not grade: no hidden checks, a bad --hidden SOURCE, a gradebook that is
         not one (or is in use), a submission that could not be fetched
    4    the batch completed, but the grader failed on some units (recorded as grader
         errors; `--retry-errors` grades them again)
    130  interrupted by SIGINT (143: SIGTERM); finished units are kept: run the same
         command again to resume
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from grader.cli_common import (
    EXIT_CANNOT_GRADE,
    EXIT_GRADER_ERROR,
    EXIT_OK,
    GraderCrash,
    _manifest,
    check_numbers,
    course_root,
)

DEFAULT_GRADEBOOK = "grades.sqlite"

_gradebook_option = click.option(
    "--gradebook", "gradebook_path", type=click.Path(dir_okay=False, path_type=Path), default=DEFAULT_GRADEBOOK,
    show_default=True, help="The gradebook file (SQLite).")


# --- progress ------------------------------------------------------------------------------

class _BarProgress:
    """A rich progress bar on stderr (a terminal)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
            TimeRemainingColumn

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True), transient=True)

    def start(self, total: int, skipped: int) -> None:
        self.task = self.bar.add_task("grading", total=total)
        self.bar.start()

    def done(self, unit, result) -> None:
        self.bar.update(self.task, advance=1,
                        description=f"grading ({unit.submission.label}, exercise {unit.exercise.number} done)")

    def close(self) -> None:
        self.bar.stop()


class _LineProgress:
    """One line per finished unit on stderr (logs, CI)."""

    def start(self, total: int, skipped: int) -> None:
        self.total, self.n = total, 0
        click.echo(f"grading {total} units ({skipped} already in the gradebook)", err=True)

    def done(self, unit, result) -> None:
        self.n += 1
        what = "grader error" if result.error else f"{result.score}/{result.max_score}"
        click.echo(f"[{self.n}/{self.total}] {unit.submission.label} exercise {unit.exercise.number}: {what}",
                   err=True)

    def close(self) -> None:
        pass


def _progress(quiet: bool):
    if quiet:
        return None
    return _BarProgress() if sys.stderr.isatty() else _LineProgress()


# --- grade batch ---------------------------------------------------------------------------

@click.command("batch")
@click.argument("submissions", nargs=-1, required=True)
@_gradebook_option
@click.option("--hidden", "hidden_source", type=click.Path(path_type=Path),
              help="Hidden checks: a folder or a tarball holding <exercise dir>/test_hidden.py "
                   "(default: the course's solutions/).")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=0,
              help="Units graded at once (default: number of cores).")
@click.option("--exercise", "numbers", type=int, multiple=True, help="Only this exercise (repeatable).")
@click.option("--regrade", is_flag=True, help="Grade again what the gradebook already holds (history is kept).")
@click.option("--retry-errors", is_flag=True, help="Grade again the units whose last grading was a grader error.")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary.")
@click.option("-q", "--quiet", is_flag=True, help="No progress output.")
def batch_cmd(submissions, gradebook_path, hidden_source, jobs, numbers, regrade, retry_errors, as_json, quiet):
    """Grade many SUBMISSIONS in parallel and record every result in the gradebook.

    A SUBMISSION is a checkout folder, a git repository (path or URL; cloned next to the
    gradebook and graded at its HEAD commit), or NAME=SOURCE to name it.  What the
    gradebook already holds for the same files, checks and grader is skipped, so an
    interrupted batch resumes where it stopped.
    """
    from grader.course import batch, gradebook, hidden
    from grader.safepath import shown

    course = course_root()
    manifest = _manifest(course)
    check_numbers(manifest, numbers)
    try:
        specs = batch.locate_all(list(submissions))
    except batch.SourceError as exc:
        raise click.UsageError(str(exc)) from None
    if not gradebook_path.resolve().parent.is_dir():
        raise click.UsageError(f"--gradebook {gradebook_path}: the folder {gradebook_path.parent} does not exist")
    source = hidden_source or course / "solutions"
    try:
        with hidden.open_hidden(source) as hidden_root:
            report = batch.run_batch(
                manifest, specs, course_root=course, hidden_root=hidden_root, gradebook=gradebook_path,
                hidden_digest=hidden.digest(hidden_root), numbers=sorted(set(numbers)) or None, jobs=jobs or None,
                regrade=regrade, retry_errors=retry_errors, progress=_progress(quiet))
            with gradebook.Gradebook(gradebook_path) as book:
                latest = book.latest_by_unit()
    except hidden.HiddenSourceError as exc:
        hint = "" if hidden_source else " (pass --hidden SOURCE: a folder or tarball of the hidden checks)"
        raise GraderCrash(f"{exc}{hint}") from None
    except gradebook.GradebookError as exc:
        raise GraderCrash(str(exc)) from None
    except KeyboardInterrupt:
        click.echo("stopped at once; finished units are in the gradebook: run the same command to resume", err=True)
        sys.exit(130)
    for label, changes in batch.uncommitted_changes(report).items():
        click.echo(f"warning: {shown(label)} has {len(changes)} exercise file(s) that differ from its last commit (e.g. "
                   f"{changes[0]}); a git repository is graded at its last commit, so they are not graded", err=True)
    summary = _summary(report, latest, gradebook_path)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        _print_summary(summary, report)
    if report.unsaved:
        click.echo(f"grade: the gradebook stopped accepting results ({report.unsaved[0][2]}); "
                   f"{len(report.unsaved)} graded unit(s) were kept in {report.unsaved_file} -- fix the gradebook, "
                   f"then `grade gradebook import --gradebook {gradebook_path} {report.unsaved_file}`", err=True)
        sys.exit(EXIT_CANNOT_GRADE)
    if report.interrupted:
        click.echo(f"interrupted: {len(report.graded)} units graded and recorded; run the same command again "
                   f"to grade the rest", err=True)
        sys.exit(128 + report.interrupted)
    for spec, why in report.fetch_errors:
        click.echo(f"could not fetch {spec.label} ({spec.source}): {why}", err=True)
    if report.grader_errors:
        click.echo(f"{len(report.grader_errors)} units could not be graded (grader errors, recorded); "
                   f"`--retry-errors` grades them again", err=True)
    if report.fetch_errors:
        sys.exit(EXIT_CANNOT_GRADE)
    sys.exit(EXIT_GRADER_ERROR if report.grader_errors else EXIT_OK)


def _summary(report, latest: dict, gradebook_path: Path) -> dict:
    """Per submission, this batch's units as the gradebook now holds them."""
    subs = []
    for sub in report.submissions:
        exercises = []
        for unit in (u for u in report.units if u.submission.key == sub.key):
            row = latest.get(unit.key)
            if row is None:  # not graded (the batch was interrupted)
                continue
            exercises.append({"exercise": unit.exercise.number, "score": row["score"],
                              "max_score": row["max_score"], "error": row["error"], "graded_at": row["graded_at"]})
        subs.append({"submission": sub.label, "submission_key": sub.key, "source": sub.source, "commit": sub.commit,
                     "score": sum(e["score"] for e in exercises), "max_score": sum(e["max_score"] for e in exercises),
                     "exercises": exercises})
    return {"format_version": 1, "gradebook": str(gradebook_path), "units": len(report.units),
            "graded": len(report.graded), "skipped": len(report.skipped), "grader_errors": len(report.grader_errors),
            "interrupted": bool(report.interrupted),
            "fetch_errors": [{"submission": s.label, "source": s.source, "error": why}
                             for s, why in report.fetch_errors],
            "submissions": subs}


def _print_summary(summary: dict, report) -> None:
    numbers = sorted({u.exercise.number for u in report.units})
    width = max([len("submission")] + [len(s["submission"]) for s in summary["submissions"]])
    click.echo(f"{'submission':<{width}}  {'score':>9}  " + "  ".join(f"{f'ex {n}':>7}" for n in numbers))
    for s in summary["submissions"]:
        cells = {e["exercise"]: ("error" if e["error"] else f"{e['score']}/{e['max_score']}") for e in s["exercises"]}
        total = f"{s['score']}/{s['max_score']}" if s["exercises"] else "-"
        click.echo(f"{s['submission']:<{width}}  {total:>9}  " + "  ".join(f"{cells.get(n, '-'):>7}" for n in numbers))
    click.echo(f"{summary['graded']} units graded, {summary['skipped']} already in {summary['gradebook']}; "
               f"{len(summary['submissions'])} submissions, {report.seconds:.1f} s with {report.jobs} workers")


# --- grade gradebook ----------------------------------------------------------------------

@click.group("gradebook")
def gradebook_group() -> None:
    """Export the gradebook, or import results graded elsewhere (`grade ci`)."""


@gradebook_group.command("export")
@_gradebook_option
@click.option("--csv", "fmt", flag_value="csv", help="One row per submission, exercise and check (the default).")
@click.option("--json", "fmt", flag_value="json", help="One object per grading, with its full result.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write here instead of to stdout.")
@click.option("--all", "history", is_flag=True, help="Every grading, not only the latest per submission and exercise.")
@click.option("--private", is_flag=True, help="Include the instructor-only text (what hidden checks measured, "
                                               "grader tracebacks). Never hand this to learners.")
def export_cmd(gradebook_path, fmt, out, history, private) -> None:
    """Write the gradebook as CSV or JSON."""
    from grader.course import gradebook

    try:
        with gradebook.Gradebook(gradebook_path, create=False) as book:
            if fmt == "json":
                text = gradebook.export_json(book, history=history, private=private) + "\n"
            else:
                import io

                buf = io.StringIO()
                gradebook.write_csv(book.check_rows(history=history, private=private), buf)
                text = buf.getvalue()
    except gradebook.GradebookError as exc:
        if not gradebook_path.exists():
            raise click.UsageError(str(exc)) from None
        raise GraderCrash(str(exc)) from None
    if out is None:
        click.echo(text, nl=False)
        return
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise click.UsageError(f"cannot write {out}: {exc.strerror or exc}") from None


@gradebook_group.command("import")
@click.argument("results", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@_gradebook_option
@click.option("--submission", "name", default="",
              help="Record these results under this submission name (default: the name each result gives).")
@click.option("--merge", is_flag=True,
              help="With --submission: record results of a different repository or folder under that name anyway.")
def import_cmd(results, gradebook_path, name, merge) -> None:
    """Merge RESULTS files (written by `grade ci ... --json FILE --instructor`) into the gradebook.

    Every result is checked against this course's manifest (its exercises, their checks and
    points) and, when GRADER_RESULT_KEY is set, must carry the grader's signature made with
    that key; one bad file refuses the import, and nothing is imported.  Importing the same
    results again adds nothing.
    """
    from grader.course import gradebook, result_file

    manifest = _manifest(course_root())
    key = result_file.course_key()
    files = []
    for path in results:
        try:
            files.append(result_file.read(path, manifest, key))
        except gradebook.GradebookError as exc:
            raise click.UsageError(str(exc)) from None
    unchecked = sum(f.signed for f in files) if key is None else 0
    if unchecked:
        click.echo(f"note: {unchecked} result(s) carry a signature, but {result_file.KEY_ENV} is not set here, so "
                   f"it was not checked", err=True)
    try:
        with gradebook.Gradebook(gradebook_path) as book:
            book.check_writable()
            added, present = book.import_runs(((run, f"import:{f.path.name}") for f in files for run in f.runs),
                                              submission=name, merge=merge)
    except gradebook.GradebookError as exc:
        raise GraderCrash(str(exc)) from None
    click.echo(f"imported {added} gradings from {len(results)} files into {gradebook_path}"
               + (f" ({present} already there)" if present else ""))
