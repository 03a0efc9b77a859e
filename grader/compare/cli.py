"""`grade compare`: the click layer over ``grader.compare`` (registered by ``grader.cli``).

Exit statuses: 0 the report was made; 2 usage error (unknown exercise, no SOURCE, a
SOURCE or gradebook that cannot be read, an unknown --pair label, an unwritable --html
file); 3 the course's manifest is broken or the grader failed; 130 interrupted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from grader.cli_common import EXIT_OK, GraderCrash, _manifest, check_numbers, course_root


class _Progress:
    """A rich progress bar on stderr while submissions are graded and measured."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn("measuring"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=Console(stderr=True), transient=True)
        self.task = None

    def __call__(self, done: int, total: int) -> None:
        if self.task is None:
            if not total:
                return
            self.task = self.bar.add_task("measuring", total=total)
            self.bar.start()
        self.bar.update(self.task, completed=done)
        if done >= total:
            self.bar.stop()


def _pair_indices(analysis, labels: tuple[str, str]) -> tuple[int, int]:
    index = {s.label: i for i, s in enumerate(analysis.solutions)}
    missing = [x for x in labels if x not in index]
    if missing:
        known = ", ".join(sorted(index)[:12]) + (" ..." if len(index) > 12 else "")
        raise click.UsageError(f"--pair: no submission labelled {', '.join(map(repr, missing))} in the SOURCEs "
                               f"(labels: {known})")
    return index[labels[0]], index[labels[1]]


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise click.UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


@click.command("compare")
@click.argument("number", type=int)
@click.argument("sources", nargs=-1)
@click.option("--gradebook", "gradebook_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Reuse outcomes graded there and keep compare's cache (fingerprints, outcomes) in it "
                   "(default: the first gradebook SOURCE; created when missing).")
@click.option("--pair", nargs=2, metavar="LABEL LABEL", default=None,
              help="Show these two submissions side by side (labels as the report shows them).")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=0,
              help="Submissions measured at once, one sandbox each (default: number of cores).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (versioned: format_version).")
@click.option("--html", "html_out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report as one self-contained HTML file (no network needed).")
@click.option("--instructor", is_flag=True,
              help="Include hidden checks' private text (what they measured). Never hand this to learners.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def compare_cmd(number, sources, gradebook_path, pair, jobs, as_json, html_out, instructor, quiet) -> None:
    """Compare the class's solutions of exercise NUMBER.

    SOURCE is a gradebook file (from `grade batch` or `grade gradebook import`) or
    submissions as `grade batch` takes them (folders, git repositories, NAME=SOURCE).
    Solutions are grouped by outcome (which checks passed and failed together), by
    approach (a structural fingerprint measured in a sandbox on fixed inputs), and
    near-identical files are paired for a human to look at.  With exactly two submission
    SOURCEs (or --pair A B), shows the two side by side.
    """
    from grader.compare import model, report_html, report_text, run
    from grader.compare.sources import CompareUsageError, is_gradebook_file

    course = course_root()
    manifest = _manifest(course)
    check_numbers(manifest, [number])
    if not sources:
        raise click.UsageError("give at least one SOURCE: a gradebook file, or submission folders / git forks")
    if html_out is not None and not html_out.resolve().parent.is_dir():
        raise click.UsageError(f"--html {html_out}: the folder {html_out.parent} does not exist")
    two = pair is None and len(sources) == 2 and not any(is_gradebook_file(s) for s in sources)
    progress = None if quiet or as_json or not sys.stderr.isatty() else _Progress()
    opts = run.Options(number, list(sources), course, gradebook=gradebook_path, jobs=jobs, instructor=instructor,
                       progress=progress)
    try:
        analysis = run.analyse(opts, manifest)
        if pair is not None or two:
            i, j = _pair_indices(analysis, pair) if pair else (0, 1)
            report = model.pair_report(analysis, i, j)
        else:
            report = model.class_report(analysis)
        page = report_html.render(report) if html_out is not None else None
    except CompareUsageError as exc:
        raise click.UsageError(str(exc)) from None
    except KeyboardInterrupt:
        click.echo("interrupted; what was measured is cached: run the same command to go on", err=True)
        sys.exit(130)
    except (click.ClickException, SystemExit):
        raise
    except Exception as exc:  # noqa: BLE001 - a grader bug: a clear message, never a traceback
        raise GraderCrash(f"grade compare failed: {type(exc).__name__}: {exc}") from None
    if page is not None:
        _write(html_out, page)
    if as_json:
        click.echo(json.dumps(report, indent=2, default=str))
    else:
        report_text.render(report)
        if html_out is not None:
            click.echo(f"report written to {html_out}")
    sys.exit(EXIT_OK)


@click.command("class")
@click.argument("gradebook_path", metavar="GRADEBOOK", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--html", "html_out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the overview as one self-contained HTML file (no network needed).")
@click.option("--csv", "csv_out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write one row per learner and exercise as CSV ('-': standard output).")
@click.option("--json", "as_json", is_flag=True, help="Print the overview as JSON (versioned: format_version).")
def class_cmd(gradebook_path, html_out, csv_out, as_json) -> None:
    """The whole class at a glance, from a GRADEBOOK (`grade batch`, `grade gradebook import`).

    Each learner's latest score and status on every exercise (and whether the sandbox
    refused something), the checks the class fails most across all exercises, who has
    not started an exercise and who is stuck (the same check failed in their last three
    or more submissions).  Learners appear only under their gradebook labels.
    """
    import io

    from grader.compare import class_view, report_class
    from grader.compare.sources import CompareUsageError, open_gradebook

    course = course_root()
    manifest = _manifest(course)
    for out in (html_out, csv_out):
        if out is not None and str(out) != "-" and not out.resolve().parent.is_dir():
            raise click.UsageError(f"{out}: the folder {out.parent} does not exist")
    if not gradebook_path.is_file():
        raise click.UsageError(f"no gradebook at {gradebook_path}")
    try:
        with open_gradebook(gradebook_path) as book:
            rows = book.gradings(history=True)
        view = class_view.overview(rows, [(e.number, e.title, e.max_score) for e in manifest.exercises])
        page = report_class.render(view) if html_out is not None else None
    except CompareUsageError as exc:
        raise click.UsageError(str(exc)) from None
    except (click.ClickException, SystemExit):
        raise
    except Exception as exc:  # noqa: BLE001 - a grader bug: a clear message, never a traceback
        raise GraderCrash(f"grade class failed: {type(exc).__name__}: {exc}") from None
    if page is not None:
        _write(html_out, page)
    if csv_out is not None:
        buf = io.StringIO()
        class_view.write_csv(view, buf)
        if str(csv_out) == "-":
            click.echo(buf.getvalue(), nl=False)
        else:
            _write(csv_out, buf.getvalue())
    if as_json:
        click.echo(json.dumps(view, indent=2))
    elif str(csv_out) != "-":
        _summary(view)
    sys.exit(EXIT_OK)


def _summary(view: dict) -> None:
    """A few lines on the terminal: learner labels and messages as plain text, never markup."""
    from grader.reports.learner_text import printable

    click.echo(f"{len(view['learners'])} learners, {len(view['exercises'])} exercises")
    for f in view["failing_checks"][:5]:
        click.echo(printable(f"  most failed: exercise {f['exercise']} {f['check']}: {f['failed']}/{f['of']}"))
    for s in view["stuck"][:10]:
        click.echo(printable(f"  stuck: {s['learner']} on exercise {s['exercise']} ({s['check']}, "
                             f"{s['submissions']} submissions)"))
    click.echo(f"  {len(view['not_started'])} (learner, exercise) pairs not started")
