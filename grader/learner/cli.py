"""The learner's commands: `grade list`, `exercise`, `all`, `hint`, `reset`, `watch`, `cache`.

A thin click layer over ``grader.runner`` (grading), ``grader.learner.state`` (hints shown and
progress, in ``.grade-state.json``), ``grader.learner.stubs`` (restoring a stub) and
``grader.learner.watch`` (re-grading on every save).  Exit codes are ``grader.cli``'s.
"""

from __future__ import annotations

import difflib
import json
import os
import sys
import traceback
from pathlib import Path

import click

from grader import runner
from grader.cli_common import EXIT_FAILED, EXIT_OK, GraderCrash, _manifest, course_root
from grader.course import hidden as hidden_mod
from grader.learner.state import State


# --- which exercises -------------------------------------------------------------------------

def resolve_exercises(manifest, items) -> list[int]:
    """Exercise numbers from numbers or slugs (``3``, ``per-example-grad-norms``), in the
    order given; an unknown one is a usage error that suggests the closest."""
    by_slug = {e.slug: e.number for e in manifest.exercises}
    numbers = []
    for item in items:
        item = str(item).strip()
        if item.isdigit() and any(e.number == int(item) for e in manifest.exercises):
            number = int(item)
        elif item in by_slug:
            number = by_slug[item]
        else:
            known = ", ".join(f"{e.number} ({e.slug})" for e in manifest.exercises)
            close = difflib.get_close_matches(item, list(by_slug), n=1, cutoff=0.5)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise click.UsageError(f"there is no exercise {item}{hint}; the exercises are {known} (see `grade list`)")
        if number not in numbers:
            numbers.append(number)
    return numbers


def hidden_root_for(course: Path, public_only: bool, hidden: Path | None) -> Path | None:
    if public_only:
        return None
    if hidden is not None:
        return hidden
    default = course / "solutions"
    return default if hidden_mod.holds_hidden_checks(default) else None


def file_snapshot(ex, course: Path, file: Path):
    """``--file``: one file graded as the exercise's learner file.  A fixture that holds only
    its mistake (``base`` in fixture.toml) is graded as base + mistake, built in memory."""
    from grader import submission
    from grader.course import verify

    folder = file.resolve().parent
    if (folder / "fixture.toml").is_file():
        source = verify.fixture_source(ex, course, folder)
        if source is not None:
            return submission.from_source(str(file), ex.module_file, source.encode("utf-8"))
    return submission.single_file(file, ex.module_file)


def signal_name(signum: int) -> str:
    import signal

    try:
        return signal.Signals(signum).name
    except ValueError:
        return str(signum)


# --- grading and reporting -------------------------------------------------------------------

def grade_and_report(numbers, submission, seed, as_json, public_only, hidden, verbose, github, jobs=1,
                     file=None, quiet=False) -> None:
    from grader import render
    from grader.cli import report_to_github

    course = course_root()
    manifest = _manifest(course)
    sub = Path(submission).resolve() if submission else course
    snapshots = {numbers[0]: file_snapshot(manifest.get(numbers[0]), course, Path(file))} if file else None
    kwargs = dict(jobs=jobs, course_root=course, submission_root=sub, snapshots=snapshots,
                  hidden_root=hidden_root_for(course, public_only, hidden), seed=seed)
    live = sys.stdout.isatty() and not (as_json or quiet or github or os.environ.get("CI"))
    try:
        if live:
            from rich.console import Console

            with render.LiveGrading(Console(), numbers, verbose) as progress:
                run = runner.grade_parallel(manifest, numbers, on_result=progress.on_result,
                                            on_check=progress.on_check if len(numbers) == 1 else None, **kwargs)
        else:
            run = runner.grade_parallel(manifest, numbers, **kwargs)
    except runner.GradingInterrupted as stop:
        click.echo(f"grade: interrupted ({signal_name(stop.signum)}); nothing was graded -- run it again", err=True)
        sys.exit(128 + stop.signum)
    except Exception as exc:  # a bug in the grader, not in the submission
        if verbose:
            traceback.print_exc(file=sys.stderr)
        raise GraderCrash(f"internal grader error ({type(exc).__name__}: {exc}); please report it "
                          f"with the output of the same command run with -v") from None
    if file is None:
        State(sub).record(run.exercises, {ex.number: ex.content_digest for ex in run.exercises})
    if as_json:
        click.echo(render.to_json(run))
    elif live:
        from rich.console import Console

        Console().print(render.totals_line(run))
    else:
        render.print_run(run, verbose=verbose, quiet=quiet)
    if github:
        report_to_github(run, sub)
    ran = [c for e in run.exercises for c in e.checks if c.status != "not_run"]
    sys.exit(EXIT_OK if ran and all(c.passed for c in ran) else EXIT_FAILED)


_grading_options = [
    click.option("--submission", type=click.Path(exists=True, file_okay=False, path_type=Path),
                 help="Grade another checkout (e.g. a learner's fork) instead of this one."),
    click.option("--seed", type=int, help="Seed for the inputs drawn at grading time (default: derived from your files)."),
    click.option("--json", "as_json", is_flag=True, help="Print machine-readable results."),
    click.option("--public-only", is_flag=True, help="Run the public checks only, as learners' copies do."),
    click.option("--hidden", type=click.Path(exists=True, file_okay=False, path_type=Path),
                 help="Folder holding <exercise dir>/test_hidden.py (default: solutions/)."),
    click.option("-v", "--verbose", is_flag=True, help="Show tracebacks and what your code printed."),
    click.option("-q", "--quiet", is_flag=True, help="One line per exercise."),
    click.option("--github", is_flag=True,
                 help="GitHub Actions: append a job summary to $GITHUB_STEP_SUMMARY and print ::error annotations."),
]


def grading_options(f):
    for opt in reversed(_grading_options):
        f = opt(f)
    return f


@click.command("exercise")
@click.argument("exercises", nargs=-1, required=True)
@grading_options
@click.option("--file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Grade this file as the exercise's learner file (e.g. a fixture, or one learner's file).")
def exercise_cmd(exercises, submission, seed, as_json, public_only, hidden, verbose, quiet, github, file) -> None:
    """Grade EXERCISES: numbers or names (`grade exercise 3`, `grade exercise 1 recompile-counting`)."""
    numbers = resolve_exercises(_manifest(course_root()), exercises)
    if file is not None and len(numbers) != 1:
        raise click.UsageError("--file grades one exercise: name exactly one")
    grade_and_report(numbers, submission, seed, as_json, public_only, hidden, verbose, github,
                     jobs=None if len(numbers) > 1 else 1, file=file, quiet=quiet)


@click.command("all")
@grading_options
@click.option("-j", "--jobs", type=int, default=0, help="Exercises graded at once (default: number of cores).")
def all_cmd(submission, seed, as_json, public_only, hidden, verbose, quiet, github, jobs) -> None:
    """Grade every exercise, each shown as soon as it is graded."""
    numbers = [e.number for e in _manifest(course_root()).exercises]
    grade_and_report(numbers, submission, seed, as_json, public_only, hidden, verbose, github, jobs=jobs or None,
                     quiet=quiet)


# --- list, hint, reset ---------------------------------------------------------------------------

def exercise_states(manifest, root: Path) -> dict[int, dict]:
    """Each exercise's state in the checkout ``root``: not started (the file is the stub),
    passing / failing (its last grading, when the files are still the ones graded), or
    changed since it was graded."""
    from grader.learner import stubs
    from grader.submission import read_submission

    progress = State(root).progress()
    out = {}
    for ex in manifest.exercises:
        snap = read_submission(root, ex.dir, ex.files)
        last = progress.get(str(ex.number))
        stub = stubs.pristine(root, ex)
        if snap.problem is not None:
            state = {"state": "problem", "text": snap.problem.message}
        elif stub is not None and snap.source() == stub:
            state = {"state": "not_started", "text": "not started"}
        elif last is None:
            state = {"state": "not_graded", "text": "not graded yet"}
        elif last.get("digest") and last["digest"] != snap.digest():
            state = {"state": "changed", "text": "changed since it was graded"}
        else:
            what = "points" if last.get("hidden_run") else "public checks"
            count = (f"{last['score']}/{last['max_score']} points" if last.get("hidden_run")
                     else f"{last['passed']}/{last['ran']} {what}")
            state = {"state": "passing" if last.get("all_passed") else "failing",
                     "text": ("passing" if last.get("all_passed") else "failing") + f", {count}"}
        out[ex.number] = state
    return out


@click.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.option("--submission", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Another checkout's exercises and progress.")
def list_cmd(as_json: bool, submission: Path | None) -> None:
    """List the exercises, with your progress on each."""
    course = course_root()
    manifest = _manifest(course)
    states = exercise_states(manifest, Path(submission or course))
    rows = [{"number": e.number, "slug": e.slug, "title": e.title,
             "files": [f"exercises/{e.dir}/{f}" for f in e.files], "max_score": e.max_score,
             "parts": list(e.parts), **states[e.number]} for e in manifest.exercises]
    if as_json:
        click.echo(json.dumps({"format_version": 2, "exercises": rows}, indent=2))
        return
    marks = {"passing": "\u2713", "failing": "\u2717", "changed": "~", "not_started": "\u00b7", "not_graded": "?",
             "problem": "!"}
    for r in rows:
        click.echo(f"{marks[r['state']]} {r['number']:>2}  {r['title']:<38} {r['text']:<34} "
                   f"{', '.join(r['files'])}  ({r['max_score']} points)")


@click.command("hint")
@click.argument("exercise")
@click.option("--part", help="Only this part's hints (e.g. A or B), for an exercise in parts.")
@click.option("--all", "show_all", is_flag=True, help="Show every hint at once.")
@click.option("--reset", is_flag=True, help="Start this exercise's hints from the first again.")
@click.option("--submission", type=click.Path(exists=True, file_okay=False, path_type=Path))
def hint_cmd(exercise: str, part: str | None, show_all: bool, reset: bool, submission: Path | None) -> None:
    """Show the next hint for EXERCISE (one more each call), from a nudge to a near-answer."""
    manifest = _manifest(course_root())
    ex = manifest.get(resolve_exercises(manifest, [exercise])[0])
    state = State(Path(submission or course_root()))
    if reset:
        state.reset_hints(ex.number)
        click.echo(f"Hints for exercise {ex.number} start from the first again.")
        return
    try:
        hints = ex.hints_for(part or "")
    except KeyError as exc:
        raise click.UsageError(str(exc.args[0])) from None
    key = f"{ex.number}/{part.upper()}" if part else str(ex.number)
    shown = hints if show_all else hints[: state.next_hint(key, len(hints))]
    where = f" part {part.upper()}" if part else ""
    for i, text in enumerate(shown, 1):
        click.echo(f"Hint {i}/{len(hints)} for exercise {ex.number}{where} ({ex.title}):\n  {text}\n")
    if not show_all and len(shown) == len(hints):
        click.echo(f"That was the last hint. `grade hint {ex.number}{' --part ' + part if part else ''} --reset` "
                   f"starts again.")
    elif not part and ex.parts:
        click.echo(f"This exercise has parts {', '.join(ex.parts)}: `grade hint {ex.number} --part "
                   f"{ex.parts[-1]}` shows one part's hints only.")


@click.command("reset")
@click.argument("exercise")
@click.option("--submission", type=click.Path(exists=True, file_okay=False, path_type=Path))
def reset_cmd(exercise: str, submission: Path | None) -> None:
    """Bring EXERCISE's stub back; your file is kept as a backup (the command says where)."""
    from grader.learner import stubs

    manifest = _manifest(course_root())
    ex = manifest.get(resolve_exercises(manifest, [exercise])[0])
    try:
        backups = stubs.reset(Path(submission or course_root()), ex)
    except stubs.ResetError as exc:
        raise click.UsageError(str(exc)) from None
    if not backups:
        click.echo(f"Exercise {ex.number}'s files are already the stub; nothing to reset.")
    for original, backup in backups:
        click.echo(f"Restored the stub of {original}; your version is kept in {backup}")


@click.command("watch")
@click.argument("exercise", required=False)
@click.option("--submission", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Watch another checkout.")
@click.option("--public-only", is_flag=True, help="Run the public checks only, as learners' copies do.")
@click.option("--stay", is_flag=True, help="Keep watching this exercise when it passes (to keep improving it).")
def watch_cmd(exercise: str | None, submission: Path | None, public_only: bool, stay: bool) -> None:
    """Re-grade on every save, one screen per exercise; on to the next when it passes.

    EXERCISE: where to start (default: the first one not passing yet).  Keys: h hint,
    l list, n/p next/previous, r grade again, q quit."""
    from grader.learner.watch import Watcher

    course = course_root()
    manifest = _manifest(course)
    start = resolve_exercises(manifest, [exercise])[0] if exercise else None
    Watcher(manifest, course, Path(submission or course).resolve(), hidden_root_for(course, public_only, None),
            start, stay=stay).run()


@click.command("cache")
@click.argument("action", type=click.Choice(["clear", "size"]))
def cache_cmd(action: str) -> None:
    """The compile cache of your gradings (~/.cache/jax-exercises-grader): `clear` or `size`."""
    from grader import cache

    if action == "clear":
        folders, size = cache.clear()
        click.echo(f"Removed {folders} cached program set(s), {size / 1e6:.1f} MB, from {cache.cache_base()}.")
    else:
        base = cache.cache_base()
        size = cache._size(base) if base.is_dir() else 0
        click.echo(f"{base}: {size / 1e6:.1f} MB (capped at {cache.MAX_TOTAL_BYTES / 1e6:.0f} MB)")


COMMANDS = (list_cmd, exercise_cmd, all_cmd, hint_cmd, reset_cmd, watch_cmd, cache_cmd)
