"""What a learner may read about a check or an exercise: the one place every writer asks.

The writers in this package only lay text out; the choice of *which* text reaches a
learner is made here, so the privacy rule lives in one function per question:

* a **public** check shows its message, what was measured and expected, the hint, where
  in the learner's file it failed, and the learner's own traceback (public inputs only);
* a **hidden** check shows only its authored message, the generic hint for the kind of
  failure, and where in the learner's file it failed.  Its measured/expected values and
  any traceback are never read here, even if a ``CheckResult`` carries them;
* ``private`` fields (a hidden check's raw measurements, grader tracebacks) are never read
  by anything in this package;
* what the learner's code printed (``ExerciseResult.output``) is left out as well: under
  hidden checks it can echo hidden inputs.

Nothing here depends on a clock, the environment or the filesystem.
"""

from __future__ import annotations

import re
from pathlib import PurePath

from grader.results import (
    BLOCKED,
    ERROR,
    FAILED,
    INTEGRITY,
    NOT_RUN,
    PASSED,
    CheckResult,
    ExerciseResult,
    RunResult,
)

#: Name of the tool as it signs its reports.
TOOL = "jax-exercises-grader"

#: The learner's traceback is cut to its last this-many characters (the end says most).
TRACEBACK_TAIL = 1500

STATUS_WORD = {PASSED: "passed", FAILED: "failed", BLOCKED: "blocked", INTEGRITY: "not scored (integrity)",
               ERROR: "grader error", NOT_RUN: "not run"}
#: Statuses of a check that ran and did not earn its points because of the learner's work.
NOT_EARNED = (FAILED, BLOCKED, INTEGRITY)

INCOMPLETE = ("grading was interrupted before it finished: this is not a grade, and no score is given; "
              "grade again")

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """Line ends as ``\\n`` and other control characters (an ANSI colour code) as ``\\xNN``.

    For formats that would render a control character as garbage or drop it silently.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def check_label(ex: ExerciseResult, check: CheckResult) -> str:
    """``Exercise 3 · matches_one_at_a_time``."""
    return f"Exercise {ex.number} \u00b7 {check.name}"


def exercise_label(ex: ExerciseResult) -> str:
    return f"Exercise {ex.number} \u00b7 {ex.title}"


def where(check: CheckResult) -> str:
    """``grad_norms.py, line 12`` when the check could tell; the file's name only, never its folder."""
    if not check.file:
        return ""
    name = PurePath(check.file).name
    return f"{name}, line {check.line}" if check.line > 0 else name


def problem_lines(check: CheckResult, with_where: bool = True) -> list[str]:
    """Why a check did not pass, for its audience: message, then labelled details (all of it
    learner-made text, passed through ``printable``).

    ``with_where=False`` leaves out the ``where:`` line, for formats that carry the place
    themselves (a GitHub annotation's file and line).
    """
    if check.status in (PASSED, NOT_RUN):
        return []
    lines = [check.message or ("grader error" if check.status == ERROR else "this check failed")]
    if check.visibility == "public":
        if check.measured:
            lines.append(f"measured: {check.measured}")
        if check.expected:
            lines.append(f"expected: {check.expected}")
    if check.hint:
        lines.append(f"try: {check.hint}")
    if with_where and where(check):
        lines.append(f"where: {where(check)}")
    return [printable(line) for line in lines]


def integrity_text(ex: ExerciseResult) -> str:
    """What the sandbox's guard accused the learner's code of, with its evidence, or ""."""
    if not ex.integrity:
        return ""
    return printable("integrity: your code " + "; ".join(ex.integrity[:4]) +
                     " -- an action aimed at the grader or at what it measures, so the measured checks of this "
                     "exercise score nothing; remove it from your file")


def learner_traceback(check: CheckResult) -> str:
    """The learner's own traceback in a public check (its tail), or "" (hidden, none, or a stub)."""
    if check.visibility != "public" or check.status == PASSED or not check.detail.strip():
        return ""
    if "NotImplementedError" in check.detail:  # an untouched stub: the message already says so
        return ""
    return printable(check.detail.strip()[-TRACEBACK_TAIL:])


def check_text(ex: ExerciseResult, check: CheckResult, traceback: bool = True) -> str:
    """A check's full learner-facing text: the grader error first, the problem, what it verifies."""
    parts = []
    if ex.error:
        parts.append(ex.error)
    if check.status == INTEGRITY and integrity_text(ex):
        parts.append(integrity_text(ex))
    if check.status == NOT_RUN:
        parts.append(check.message or "not run")
    elif check.status == PASSED:
        parts.append("passed")
    else:
        parts.append("\n".join(problem_lines(check)))
    if check.summary:
        parts.append(f"this check verifies: {check.summary}")
    tb = learner_traceback(check) if traceback else ""
    if tb:
        parts.append("your code's traceback (last lines):\n" + tb)
    return "\n\n".join(parts)


def not_run(ex: ExerciseResult) -> list[CheckResult]:
    return [c for c in ex.checks if c.status == NOT_RUN]


def exercise_verdict(ex: ExerciseResult) -> str:
    """``2 of 5 checks passed``, plus what was not run and whether the grader failed."""
    ran = [c for c in ex.checks if c.status != NOT_RUN]
    passed = sum(c.passed for c in ran)
    text = f"{passed} of {len(ran)} checks passed"
    skipped = not_run(ex)
    if skipped:
        noun = "check" if len(skipped) == 1 else "checks"
        text += f"; {len(skipped)} hidden {noun} not run ({', '.join(c.name for c in skipped)})"
    if ex.error:
        text += "; " + ex.error
    if ex.integrity:
        text += "; measured checks not scored (integrity)"
    return text


def seed_text(run: RunResult) -> str:
    if run.seed_option is not None:
        return f"--seed {run.seed_option}"
    seeds = ", ".join(f"exercise {e.number}: {e.seed}" for e in run.exercises)
    return f"drawn from each file ({seeds})" if seeds else "drawn from each file"


def provenance(run: RunResult) -> str:
    """One line: who graded, with which JAX, which seeds, when and what."""
    text = f"graded by {TOOL} {run.grader_version} with JAX {run.jax_version}; seed {seed_text(run)}"
    if run.started_at:
        text += f"; started {run.started_at}"
    if run.submission:
        text += f"; submission {run.submission}"
    return text
