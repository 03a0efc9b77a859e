"""`grade class GRADEBOOK`: the whole class at a glance, from the gradebook alone.

Three views of every grading the gradebook holds (``grade batch``, ``grade gradebook
import``), as plain data (``overview``) that the HTML page (``report_class``), the CSV
(``write_csv``) and ``--json`` render:

* **learner x exercise**: each learner's latest grading of each exercise -- score, status
  and whether the sandbox's guard refused something (integrity);
* **the checks the class fails most**, across every exercise: for each check, how many
  learners' latest gradings did not pass it, with its most common message;
* **who needs a hand**: learners who have not started an exercise (no grading, or every
  check still says "not implemented"), and learners who are **stuck**: their last
  ``STUCK_AFTER`` or more submissions of an exercise (different files each time) all
  failed the same check.

Learners appear only under their gradebook labels.  Hidden checks' private text is never
read here: messages are the learner-facing ones.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
from collections import Counter
from collections.abc import Iterable
from typing import IO, Any

from grader.results import PASSED, ExerciseResult

FORMAT_VERSION = 1
STUCK_AFTER = 3  # submissions in a row failing the same check
TOP_CHECKS = 15
NOT_IMPLEMENTED = "not implemented yet"

#: A cell's status, from best to worst; what the page colours and the CSV writes.
STATUSES = ("full marks", "partial", "zero", "not started", "grader error", "not graded")


@dataclasses.dataclass(frozen=True)
class Cell:
    learner: str
    exercise: int
    status: str  # one of STATUSES
    score: int | None
    max_score: int | None
    integrity: tuple[str, ...] = ()
    submissions: int = 0  # gradings of different files
    stuck_on: str = ""  # the check the last STUCK_AFTER+ submissions all failed
    stuck_for: int = 0
    graded_at: str = ""


def status_of(result: ExerciseResult | None) -> str:
    """A grading's status for the class view."""
    if result is None:
        return "not graded"
    if result.error:
        return "grader error"
    if result.checks and not any(c.passed for c in result.checks) and \
            any(c.message.startswith(NOT_IMPLEMENTED) for c in result.checks):
        return "not started"
    if result.max_score and result.score == result.max_score:
        return "full marks"
    return "partial" if result.score > 0 else "zero"


def _failing(result: ExerciseResult) -> set[str]:
    return {c.name for c in result.checks if c.status != PASSED}


def stuck(history: list[ExerciseResult]) -> tuple[str, int]:
    """The check the latest submissions all failed, and for how many in a row (at least
    ``STUCK_AFTER`` different submissions, none with full marks); ("", 0) otherwise.
    ``history`` is oldest first, one grading per distinct submission."""
    run: set[str] | None = None
    count = 0
    for result in reversed(history):
        if result.error or status_of(result) in ("full marks", "not started"):
            break
        failing = _failing(result)
        common = failing if run is None else run & failing
        if not common:
            break
        run, count = common, count + 1
    if run and count >= STUCK_AFTER:
        return sorted(run)[0], count
    return "", 0


def _distinct(rows: list[dict[str, Any]]) -> list[ExerciseResult]:
    """One grading per distinct submission (content hash), oldest first: a submission
    graded twice (a regrade) counts once."""
    seen: dict[str, tuple[str, ExerciseResult]] = {}
    for row in sorted(rows, key=lambda r: r["graded_at"]):
        result = ExerciseResult.from_dict(row["result"])
        seen[row["content_hash"] or result.content_digest or row["graded_at"]] = (row["graded_at"], result)
    return [result for _, result in sorted(seen.values(), key=lambda item: item[0])]


def overview(rows: Iterable[dict[str, Any]], exercises: list[tuple[int, str, int]]) -> dict[str, Any]:
    """The class view from gradebook rows (``Gradebook.gradings(history=True)``) and the
    course's exercises ``(number, title, max_score)``."""
    by_cell: dict[tuple[str, int], list[dict[str, Any]]] = {}
    learners: dict[str, str] = {}  # submission key -> label
    for row in rows:
        learners.setdefault(row["submission_key"], row["submission"])
        by_cell.setdefault((row["submission_key"], int(row["exercise"])), []).append(row)
    numbers = [n for n, _, _ in exercises]
    cells: list[Cell] = []
    for key, label in sorted(learners.items(), key=lambda kv: (kv[1], kv[0])):
        for n in numbers:
            history = by_cell.get((key, n), [])
            if not history:
                cells.append(Cell(label, n, "not started", None, None))
                continue
            try:
                graded = _distinct(history)
                latest = graded[-1]
                on, run = stuck(graded)
                cells.append(Cell(label, n, status_of(latest), latest.score, latest.max_score,
                                  tuple(latest.integrity), len(graded), on, run,
                                  max(r["graded_at"] for r in history)))
            except Exception as exc:  # noqa: BLE001 - a malformed grading is its own cell, never a crash
                cells.append(Cell(label, n, "grader error", None, None, (), len(history),
                                  graded_at=f"unreadable grading: {type(exc).__name__}"))
    return {
        "format_version": FORMAT_VERSION, "kind": "class-overview",
        "generated_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "exercises": [{"number": n, "title": t, "max_score": m} for n, t, m in exercises],
        "learners": sorted({c.learner for c in cells}),
        "cells": [{**dataclasses.asdict(c), "integrity": list(c.integrity)} for c in cells],
        "totals": _totals(cells, exercises),
        "failing_checks": _failing_checks(by_cell, learners),
        "not_started": [{"learner": c.learner, "exercise": c.exercise} for c in cells if c.status == "not started"],
        "stuck": [{"learner": c.learner, "exercise": c.exercise, "check": c.stuck_on, "submissions": c.stuck_for}
                  for c in cells if c.stuck_on],
        "stuck_after": STUCK_AFTER,
    }


def _totals(cells: list[Cell], exercises: list[tuple[int, str, int]]) -> dict[str, Any]:
    per_learner: dict[str, int] = {}
    for c in cells:
        per_learner[c.learner] = per_learner.get(c.learner, 0) + (c.score or 0)
    per_exercise = {}
    for n, _, _ in exercises:
        counts = Counter(c.status for c in cells if c.exercise == n)
        per_exercise[str(n)] = {s: counts.get(s, 0) for s in STATUSES}
    return {"max_score": sum(m for _, _, m in exercises), "by_learner": per_learner, "by_exercise": per_exercise}


def _failing_checks(by_cell: dict[tuple[str, int], list[dict[str, Any]]], learners: dict[str, str]) -> list[dict]:
    """Checks by how many learners' latest gradings do not pass them (learners who have not
    started an exercise are not counted against its checks)."""
    failed: Counter = Counter()
    graded: Counter = Counter()
    messages: dict[tuple[int, str], Counter] = {}
    titles: dict[int, str] = {}
    for (key, n), rows in by_cell.items():
        try:
            latest = ExerciseResult.from_dict(max(rows, key=lambda r: r["graded_at"])["result"])
        except Exception:  # noqa: BLE001 - counted in the learner x exercise view as a grader error
            continue
        titles[n] = latest.title
        if latest.error or status_of(latest) == "not started":
            continue
        for c in latest.checks:
            graded[(n, c.name)] += 1
            if c.status != PASSED:
                failed[(n, c.name)] += 1
                messages.setdefault((n, c.name), Counter())[c.message.splitlines()[0][:300] if c.message else ""] += 1
    out = []
    for (n, name), count in sorted(failed.items(), key=lambda kv: (-kv[1] / graded[kv[0]], -kv[1], kv[0])):
        top = messages[(n, name)].most_common(1)[0][0] if messages.get((n, name)) else ""
        out.append({"exercise": n, "title": titles.get(n, ""), "check": name, "failed": count,
                    "of": graded[(n, name)], "rate": round(count / graded[(n, name)], 3), "message": top})
    return out[:TOP_CHECKS]


CSV_COLUMNS = ("learner", "exercise", "status", "score", "max_score", "integrity", "submissions", "stuck_on",
               "stuck_for", "graded_at")


def write_csv(view: dict[str, Any], out: IO[str]) -> None:
    """One row per learner and exercise.  Cells starting with ``=``, ``+``, ``-`` or ``@``
    are quoted with a leading apostrophe, so a spreadsheet never runs a label as a formula."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for c in view["cells"]:
        row = [c["learner"], c["exercise"], c["status"], c["score"], c["max_score"], "; ".join(c["integrity"]),
               c["submissions"], c["stuck_on"], c["stuck_for"], c["graded_at"]]
        writer.writerow([_cell(v) for v in row])


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value
