"""Reports: pure functions of a ``RunResult`` (terminal text with rich, or JSON)."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from grader.reports import learner_text as lt
from grader.results import BLOCKED, ERROR, FAILED, INTEGRITY, NOT_RUN, PASSED, ExerciseResult, RunResult

_ICON = {PASSED: "[green]PASS[/]", FAILED: "[red]FAIL[/]", BLOCKED: "[yellow]BLKD[/]", INTEGRITY: "[red]VOID[/]",
         ERROR: "[magenta]ERR [/]", NOT_RUN: "[dim]----[/]"}

SHOWN_OUTPUT = 2000  # characters of printed output in a panel (the last ones)


def to_json(run: RunResult) -> str:
    return json.dumps(run.to_dict(), indent=2, sort_keys=False)


def verdict_line(ex: ExerciseResult) -> str:
    run_checks = [c for c in ex.checks if c.status != NOT_RUN]
    passed = sum(c.passed for c in run_checks)
    if ex.hidden_run:
        if ex.all_passed:
            return f"all {len(run_checks)} checks passed"
        return f"{passed} of {len(run_checks)} checks passed"
    hidden = len(ex.checks) - len(run_checks)
    state = "public checks passed" if run_checks and passed == len(run_checks) else f"{passed} of {len(run_checks)} public checks passed"
    return f"{state} ({hidden} hidden checks not run here: they carry the points and run when your course grades your work)"


def _shown_path(path: str) -> str:
    """A path relative to the current folder when it is inside it (shorter to read)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path


def _exercise_panel(ex: ExerciseResult, verbose: bool) -> Panel:
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, expand=False)
    table.add_column("", width=4)
    table.add_column("check")
    table.add_column("points", justify="right")
    table.add_column("")
    for c in ex.checks:
        pts = f"{c.score}/{c.max_score}" if c.status != NOT_RUN else "-"
        table.add_row(_ICON.get(c.status, c.status), escape(c.name), pts, f"[dim]{c.visibility}[/]")
    details = []
    seen: dict[tuple[str, str], str] = {}
    for c in ex.checks:
        if c.status in (PASSED, NOT_RUN):
            continue
        body = Text()
        body.append(f"{c.name}: ", style="bold")
        key = (c.message.split(" [")[0], c.detail)
        if key in seen:  # e.g. every check of a stub says "not implemented": say it once
            body.append(f"same problem as {seen[key]}", style="dim")
            details.append(body)
            continue
        seen[key] = c.name
        body.append(lt.printable(c.message) + "\n")
        for label, value in (("measured", c.measured), ("expected", c.expected), ("try", c.hint)):
            if value:
                body.append(f"  {label}: ", style="cyan")
                body.append(lt.printable(value).replace("\n", "\n    ") + "\n")
        if c.detail and (verbose or c.status == FAILED) and "NotImplementedError" not in c.detail:
            body.append("  your code's traceback:\n", style="cyan")
            body.append("    " + lt.printable(c.detail.strip()).replace("\n", "\n    ")[-1500:] + "\n", style="dim")
        body.rstrip()
        details.append(body)
    files = ", ".join(_shown_path(f) for f in ex.files)
    head = Text.from_markup(
        f"[bold]{ex.score}/{ex.max_score}[/] points - {escape(verdict_line(ex))}\n"
        f"[dim]file: {escape(files)}   seed: {ex.seed} (reproduce with --seed {ex.seed})[/]"
    )
    parts = [head, table, *details]
    if ex.error:
        parts.append(Text(ex.error, style="red"))
    if ex.integrity:
        parts.append(Text(lt.integrity_text(ex), style="red"))
    if verbose and (ex.timings or ex.checks):
        parts.append(Text(timings_text(ex), style="dim"))
    if ex.output and verbose:
        shown = ex.output[-SHOWN_OUTPUT:]
        cut = len(ex.output) - len(shown)
        more = f"... [{cut} earlier characters cut; --json has all the grader kept]\n" if cut else ""
        parts.append(Text("your code printed:\n" + more + lt.printable(shown), style="dim"))
    style = "green" if ex.all_passed else ("yellow" if ex.score else "red")
    return Panel(Group(*parts), title=f"Exercise {ex.number}: {escape(ex.title)}", title_align="left", border_style=style)


def _worker_time(role: str, t: dict) -> str:
    remembered = t.get("remembered", 0)
    if remembered and not t.get("wall_s"):
        return f"{role} from memory ({remembered} answers)"
    text = f"{role} {t.get('cpu_s', 0):.2f} / {t.get('wall_s', 0):.2f} s"
    if t.get("start_cpu_s"):
        text += f" (start {t['start_cpu_s']:.2f}, import {t.get('import_cpu_s', 0):.2f})"
    return text + (f" ({remembered} answers from memory)" if remembered else "")


def timings_text(ex: ExerciseResult, slowest: int = 3) -> str:
    """Where the grading's time went (``-v``): each worker's CPU and wall seconds (and of its
    CPU, its start-up and the learner's import), and the slowest checks (their pytest
    durations, which include waiting on the workers)."""
    lines = [f"time: {ex.duration_s:.2f} s in all"]
    if ex.timings:
        lines.append("  workers (CPU / wall): " + ", ".join(_worker_time(role, t) for role, t in ex.timings.items()))
    ran = sorted((c for c in ex.checks if c.duration_s), key=lambda c: -c.duration_s)[:slowest]
    if ran:
        lines.append("  slowest checks: " + ", ".join(f"{c.name} {c.duration_s:.2f} s" for c in ran))
    return "\n".join(lines)


def print_exercise(ex: ExerciseResult, console: Console, verbose: bool = False) -> None:
    console.print(_exercise_panel(ex, verbose))


def totals_line(run: RunResult) -> str:
    """The last line: points, or -- where no hidden check ran (a learner's copy) -- how many
    public checks pass and what the course still grades."""
    if any(ex.hidden_run for ex in run.exercises):
        return (f"[bold]Total: {run.score}/{run.max_score}[/] points over {len(run.exercises)} exercise"
                f"{'s' if len(run.exercises) != 1 else ''} ({run.duration_s:.1f} s, JAX {run.jax_version})")
    ran = [c for ex in run.exercises for c in ex.checks if c.status != NOT_RUN]
    hidden = [c for ex in run.exercises for c in ex.checks if c.status == NOT_RUN]
    passed = sum(c.passed for c in ran)
    done = sum(1 for ex in run.exercises if any(c.status != NOT_RUN for c in ex.checks)
               and all(c.passed for c in ex.checks if c.status != NOT_RUN))
    return (f"[bold]Public checks: {passed} of {len(ran)} pass[/] ({done} of {len(run.exercises)} exercise"
            f"{'s' if len(run.exercises) != 1 else ''} with every public check passing); {len(hidden)} hidden "
            f"checks carry the points and run when your course grades your work "
            f"[dim]({run.duration_s:.1f} s, JAX {run.jax_version})[/]")


def quiet_line(ex: ExerciseResult) -> str:
    return f"Exercise {ex.number}: {ex.score}/{ex.max_score} points - {verdict_line(ex)}"


def print_run(run: RunResult, console: Console | None = None, verbose: bool = False, quiet: bool = False) -> None:
    console = console or Console()
    if run.incomplete:
        console.print(f"[bold red]{escape(lt.INCOMPLETE)}[/]")
        return
    for ex in run.exercises:
        if quiet:
            console.print(escape(quiet_line(ex)), highlight=False, soft_wrap=True)
        else:
            print_exercise(ex, console, verbose)
    if not quiet:
        console.print(totals_line(run))


class LiveGrading:
    """While grading on a terminal: a status line saying which exercise and check is running
    and for how long, and each exercise's panel printed as soon as it is graded."""

    def __init__(self, console: Console, numbers: list[int], verbose: bool = False):
        self.console = console
        self.pending = list(numbers)
        self.verbose = verbose
        self.current: dict[int, str] = {}
        self._status = None
        self._t0 = 0.0

    def __enter__(self) -> "LiveGrading":
        import threading
        import time

        self._t0 = time.monotonic()
        self._status = self.console.status(self._text(), spinner="dots")
        self._status.__enter__()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick_until_stopped, daemon=True)
        self._ticker.start()
        return self

    def _tick_until_stopped(self) -> None:
        while not self._stop.wait(0.5):
            self.tick()

    def _text(self) -> str:
        import time

        elapsed = time.monotonic() - self._t0 if self._t0 else 0.0
        doing = ", ".join(f"exercise {n}" + (f" \u00b7 {escape(self.current[n])}" if self.current.get(n) else "")
                          for n in self.pending[:3])
        more = f" and {len(self.pending) - 3} more" if len(self.pending) > 3 else ""
        return f"grading {doing}{more} [dim]({elapsed:.1f} s)[/]"

    def on_check(self, number: int, check: str) -> None:
        self.current[number] = check
        if self._status is not None:
            self._status.update(self._text())

    def on_result(self, ex: ExerciseResult) -> None:
        if ex.number in self.pending:
            self.pending.remove(ex.number)
        self.console.print(_exercise_panel(ex, self.verbose))
        if self._status is not None:
            self._status.update(self._text())

    def tick(self) -> None:
        if self._status is not None:
            self._status.update(self._text())

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._ticker.join(timeout=1)
        if self._status is not None:
            self._status.__exit__(*exc)
