"""GitHub Actions: a job summary in Markdown and workflow-command annotations.

``job_summary(run)`` is Markdown for ``$GITHUB_STEP_SUMMARY`` (``write_summary`` appends it
to that file).  It opens with a version comment, ``<!-- jax-exercises-grader summary v1 -->``,
then the total score, a warning when the grader failed, one table of exercises (status, points, verdict), every check that
did not pass with its learner-facing text in a fenced block, a collapsed table of all
checks, and a provenance line (grader and JAX versions, seed).  Titles and names in tables
are escaped for Markdown and HTML; free text goes in a fence longer than any backtick run
inside it, so nothing a message contains is rendered as markup.

``annotations(run, root)`` returns workflow commands, one per line, to print from a step:

* ``::error file=PATH,line=N,title=Exercise 3 · <check>::MESSAGE`` for a failed check.
  ``PATH`` is relative to ``root`` (the checked-out repository).  The place is the check's
  own ``file``/``line`` when it could tell; otherwise the exercise's learner file
  (``ExerciseResult.files[0]``) with no line; when that file is not inside ``root``, no
  ``file`` at all.  Checks of one exercise with the same place and text are merged into
  one annotation whose title names them all (a stub fails every check the same way).
* ``::warning title=...::MESSAGE`` (no file) for a check the grader itself failed on, one
  per exercise the grader could not grade, and a first one when grading could not run at
  all (``RunResult.error``): the learner's file is not at fault.
* nothing for passing or not-run checks, and a final ``::notice title=Grade::...`` with the
  total score, the grader and JAX versions and this format's version
  (``GITHUB_ANNOTATIONS_FORMAT_VERSION``).
* GitHub shows at most 10 annotations of each kind per step; they come in manifest order.

Escaping follows GitHub's workflow-command rules: in the message ``%``, ``\\r`` and ``\\n``
become ``%25``, ``%0D`` and ``%0A``; in property values ``:`` and ``,`` also become ``%3A``
and ``%2C``.  So every command is exactly one line and a message cannot start a command
of its own.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path, PurePath

from grader.reports import learner_text as lt
from grader.results import (
    ERROR,
    NOT_RUN,
    PASSED,
    CheckResult,
    ExerciseResult,
    RunResult,
)

#: Bumped whenever the layout of ``job_summary``'s Markdown changes.
GITHUB_SUMMARY_FORMAT_VERSION = 1
#: Bumped whenever what ``annotations`` emits changes.
GITHUB_ANNOTATIONS_FORMAT_VERSION = 1

SUMMARY_MARKER = f"<!-- {lt.TOOL} summary v{GITHUB_SUMMARY_FORMAT_VERSION} -->"
_SOME_NOT_GRADED = ("Some exercises could not be graded because of a grader error (not your code's fault); "
                    "your instructor has the details.")

# ----------------------------------------------------------------------------- Markdown

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def md_inline(text: str) -> str:
    """Text safe inside a Markdown table cell or a line: one line, no markup, no HTML."""
    one_line = " ".join(lt.printable(text).split())
    return _MD_SPECIAL.sub(r"\\\1", html.escape(one_line, quote=False))


def md_fence(text: str, info: str = "text") -> str:
    """A fenced block that shows ``text`` verbatim (the fence outgrows any backtick run in it).

    Control characters are shown as ``\\xNN`` (``learner_text.printable``).
    """
    text = lt.printable(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def _icon(ex: ExerciseResult) -> str:
    if ex.error:
        return "\u26a0\ufe0f"  # warning sign: the grader failed
    if any(c.status in (*lt.NOT_EARNED, ERROR) for c in ex.checks):
        return "\u274c"  # cross
    if lt.not_run(ex) or not ex.checks:
        return "\u2796"  # minus: nothing failed, but not everything ran
    return "\u2705"  # check mark


def _exercise_table(run: RunResult) -> list[str]:
    lines = ["| | # | exercise | points | checks |", "|---|---:|---|---:|---|"]
    for ex in run.exercises:
        lines.append(f"| {_icon(ex)} | {ex.number} | {md_inline(ex.title)} | {ex.score}/{ex.max_score} "
                     f"| {md_inline(lt.exercise_verdict(ex))} |")
    return lines


def _problems(run: RunResult) -> list[str]:
    lines: list[str] = []
    for ex in run.exercises:
        if ex.error:
            lines += ["", f"**{md_inline(lt.exercise_label(ex))}**: could not be graded", "", md_fence(ex.error)]
        if lt.integrity_text(ex):
            lines += ["", f"**{md_inline(lt.exercise_label(ex))}**: integrity", "", md_fence(lt.integrity_text(ex))]
        for c in ex.checks:
            if c.status not in (*lt.NOT_EARNED, ERROR) or ex.error:
                continue
            heading = (f"**{md_inline(lt.check_label(ex, c))}** "
                       f"({c.visibility}, {c.score}/{c.max_score} points, {lt.STATUS_WORD[c.status]})")
            lines += ["", heading, "", md_fence(lt.check_text(ex, c))]
    return ["", "### Checks that did not pass", *lines] if lines else []


def _all_checks(run: RunResult) -> list[str]:
    lines = ["", "<details><summary>All checks</summary>", "",
             "| exercise | check | visibility | status | points |",
             "|---:|---|---|---|---:|"]
    for ex in run.exercises:
        for c in ex.checks:
            points = "-" if c.status == NOT_RUN else f"{c.score}/{c.max_score}"
            status = lt.STATUS_WORD.get(c.status, c.status)
            lines.append(f"| {ex.number} | {md_inline(c.name)} | {c.visibility} | {status} | {points} |")
    return lines + ["", "</details>"]


def job_summary(run: RunResult) -> str:
    """Markdown for ``$GITHUB_STEP_SUMMARY`` (ends with a newline)."""
    if run.incomplete:
        return "\n".join([SUMMARY_MARKER, "## Grading interrupted", "", "> [!WARNING]", f"> {md_inline(lt.INCOMPLETE)}",
                          "", f"<sub>{md_inline(lt.provenance(run))}</sub>"]) + "\n"
    lines = [SUMMARY_MARKER, f"## Grade: {run.score}/{run.max_score} points", ""]
    if run.error:
        lines += ["> [!WARNING]", f"> {md_inline(run.error)}", ""]
    elif run.grader_errors:
        lines += ["> [!WARNING]", "> " + _SOME_NOT_GRADED, ""]
    if run.exercises:
        lines += _exercise_table(run)
        lines += _problems(run)
        lines += _all_checks(run)
    else:
        lines.append("No exercise was graded.")
    lines += ["", f"<sub>{md_inline(lt.provenance(run))}</sub>"]
    return "\n".join(lines) + "\n"


def write_summary(run: RunResult, path: str | os.PathLike) -> None:
    """Append ``job_summary(run)`` to ``path`` (``$GITHUB_STEP_SUMMARY``), creating it if needed."""
    path = Path(path)
    gap = "\n" if path.exists() and path.stat().st_size else ""
    with path.open("a", encoding="utf-8") as f:
        f.write(gap + job_summary(run))


# ----------------------------------------------------------------------------- annotations

def escape_data(text: str) -> str:
    """A workflow command's message: ``%``, CR and LF escaped."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: as ``escape_data``, plus ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(kind: str, message: str, **properties: object) -> str:
    """``::kind key=value,...::message``; properties whose value is empty or 0 are left out."""
    props = ",".join(f"{k}={escape_property(str(v))}" for k, v in properties.items() if v)
    return f"::{kind}{' ' + props if props else ''}::{escape_data(message)}"


def _under(file: str, root: str) -> str | None:
    """``file`` relative to ``root`` in POSIX form, or None when it is not inside ``root``."""
    try:
        rel = os.path.relpath(os.path.normpath(os.path.join(root, file)), root)
    except ValueError:  # another drive (Windows)
        return None
    if rel == os.curdir or rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        return None
    return PurePath(rel).as_posix()


def relative_path(file: str, root: Path) -> str | None:
    """Where ``file`` is in the checkout ``root``: by path first, then with symlinks resolved."""
    if not file:
        return None
    plain = _under(file, os.path.normpath(os.path.abspath(root)))
    if plain is not None:
        return plain
    return _under(str(Path(file).resolve()), str(Path(root).resolve()))


def _place(ex: ExerciseResult, check: CheckResult, root: Path) -> tuple[str | None, int, bool]:
    """(file relative to root or None, line or 0, whether that is the check's own place)."""
    if check.file:
        rel = relative_path(check.file, root)
        if rel is not None:
            return rel, max(check.line, 0), True
    return (relative_path(ex.files[0], root) if ex.files else None), 0, False


def _exercise_annotations(ex: ExerciseResult, root: Path) -> list[str]:
    if ex.error:
        return [command("warning", ex.error, title=f"{lt.exercise_label(ex)}: not graded")]
    if ex.integrity:
        order_head = [command("error", lt.integrity_text(ex), title=f"{lt.exercise_label(ex)}: integrity")]
    else:
        order_head = []
    order: list[str | tuple] = []  # finished commands, and keys of merged failures, in manifest order
    groups: dict[tuple, list[CheckResult]] = {}
    for c in ex.checks:
        if c.status == ERROR:
            order.append(command("warning", "\n".join(lt.problem_lines(c)), title=lt.check_label(ex, c)))
        elif c.status in lt.NOT_EARNED:
            file, line, own = _place(ex, c, root)
            key = (file, line, "\n".join(lt.problem_lines(c, with_where=not own)))
            if key not in groups:
                groups[key] = []
                order.append(key)
            groups[key].append(c)
    out = list(order_head)
    for item in order:
        if isinstance(item, str):
            out.append(item)
            continue
        file, line, text = item
        title = f"Exercise {ex.number} \u00b7 {', '.join(c.name for c in groups[item])}"
        out.append(command("error", text, file=file or "", line=line, title=title))
    return out


def annotations(run: RunResult, root: Path) -> list[str]:
    """Workflow commands for ``run``, file paths relative to the checkout ``root``."""
    if run.incomplete:
        return [command("error", lt.INCOMPLETE, title="Grading interrupted")]
    out = [command("warning", lt.printable(run.error), title="Grading")] if run.error else []
    out += [a for ex in run.exercises for a in _exercise_annotations(ex, root)]
    passed = sum(c.status == PASSED for ex in run.exercises for c in ex.checks)
    ran = sum(c.status != NOT_RUN for ex in run.exercises for c in ex.checks)
    out.append(command(
        "notice",
        f"{run.score}/{run.max_score} points; {passed} of {ran} checks passed "
        f"({lt.TOOL} {run.grader_version}, JAX {run.jax_version}, annotations v{GITHUB_ANNOTATIONS_FORMAT_VERSION})",
        title="Grade",
    ))
    return out
