"""Gradescope autograder ``results.json``, written from a ``RunResult``.

Gradescope runs ``run_autograder`` and reads ``/autograder/results/results.json`` (format:
Gradescope's "Autograder Specifications" page).  What this writer puts there:

* top level: ``score`` (points earned), ``execution_time`` (whole seconds), ``output`` (a
  plain-text summary: total, one line per exercise, provenance), ``output_format``,
  ``test_output_format`` and ``test_name_format`` (all ``"text"``: learner messages are shown
  as written, nothing in them is markup), ``visibility: "visible"``,
  ``stdout_visibility: "hidden"`` (the autograder's stdout is for the instructor) and
  ``extra_data`` with this format's name and version (``format``, ``format_version``), the
  grader and JAX versions, the seed, ``max_score`` and a per-exercise breakdown;
* ``tests``: one per check that ran, in manifest order, named ``Exercise 3 · <check>``
  and numbered ``"3.2"`` (exercise, position of the check in the manifest).  ``score`` and
  ``max_score`` are the check's points; ``status`` is ``passed`` or ``failed`` (a grader
  error is ``failed``); ``visibility`` is ``visible`` for public checks and
  ``after_published`` for hidden ones (they carry the points; learners see them once the
  instructor publishes grades); ``tags`` name the exercise, visibility and status;
  ``output`` is the learner-facing text (``grader.reports.learner_text.check_text``);
  ``extra_data`` holds the exercise number, check name, our status and the duration.

Decisions:

* A check that was **not run** (a hidden check when hidden checks were unavailable) is
  omitted from ``tests``: a 0/0 test would show as a green pass on Gradescope.  It is
  listed instead in the top-level ``output`` and in ``extra_data.exercises[].not_run``.
* An exercise the grader could not grade (``ExerciseResult.error``) still appears: each of
  its checks scores 0 with the error text first in its output, and when none of its checks
  would appear a single ``Exercise N · grading`` test (0/0, failed) carries the error.
  When grading could not run at all (``RunResult.error``), a first ``Grading`` test
  (0/0, failed, number ``"0"``) and the first line of ``output`` say so.
* No ``private`` field and no learner stdout is ever read (see ``grader.reports``).

``to_gradescope_json`` serialises with sorted keys and a 2-space indent, so the same
result always gives the same bytes.
"""

from __future__ import annotations

import json
from typing import Any

from grader.reports import learner_text as lt
from grader.results import (
    NOT_RUN,
    PASSED,
    RESULT_FORMAT_VERSION,
    ExerciseResult,
    RunResult,
)

#: Bumped whenever the shape of ``to_gradescope``'s output changes.
GRADESCOPE_FORMAT_VERSION = 1
FORMAT_NAME = f"{lt.TOOL}/gradescope"

_VISIBILITY = {"public": "visible"}  # anything else (hidden) -> after_published


def _test(ex: ExerciseResult, index: int, check) -> dict[str, Any]:
    status = "passed" if check.status == PASSED else "failed"
    visibility = _VISIBILITY.get(check.visibility, "after_published")
    return {
        "name": lt.check_label(ex, check),
        "name_format": "text",
        "number": f"{ex.number}.{index}",
        "score": check.score,
        "max_score": check.max_score,
        "status": status,
        "visibility": visibility,
        "output": lt.check_text(ex, check),
        "output_format": "text",
        "tags": [f"exercise-{ex.number}", ex.slug, check.visibility, check.status],
        "extra_data": {
            "exercise": ex.number,
            "check": check.name,
            "status": check.status,
            "duration_s": round(check.duration_s, 3),
        },
    }


def _grading_error_test(ex: ExerciseResult) -> dict[str, Any]:
    return {
        "name": f"Exercise {ex.number} \u00b7 grading",
        "name_format": "text",
        "number": f"{ex.number}.0",
        "score": 0,
        "max_score": 0,
        "status": "failed",
        "visibility": "visible",
        "output": ex.error,
        "output_format": "text",
        "tags": [f"exercise-{ex.number}", ex.slug, "grader-error"],
        "extra_data": {"exercise": ex.number, "check": "", "status": "error", "duration_s": 0.0},
    }


def _tests(ex: ExerciseResult) -> list[dict[str, Any]]:
    tests = [_test(ex, i, c) for i, c in enumerate(ex.checks, start=1) if c.status != NOT_RUN]
    if ex.error and not tests:
        tests.append(_grading_error_test(ex))
    return tests


def _run_error_test(run: RunResult) -> dict[str, Any]:
    return {
        "name": "Grading",
        "name_format": "text",
        "number": "0",
        "score": 0,
        "max_score": 0,
        "status": "failed",
        "visibility": "visible",
        "output": run.error,
        "output_format": "text",
        "tags": ["grader-error"],
        "extra_data": {"exercise": 0, "check": "", "status": "error", "duration_s": 0.0},
    }


def _summary(run: RunResult) -> str:
    if run.incomplete:
        return lt.INCOMPLETE + "\n" + lt.provenance(run) + "."
    lines = [run.error] if run.error else []
    lines.append(f"Score: {run.score}/{run.max_score} points over {len(run.exercises)} exercises.")
    for ex in run.exercises:
        lines.append(f"{lt.exercise_label(ex)}: {ex.score}/{ex.max_score} points, {lt.exercise_verdict(ex)}")
    if run.grader_errors:
        lines.append("Some exercises could not be graded because of a grader error (not your code's fault); "
                     "your instructor has the details.")
    lines.append(lt.provenance(run) + ".")
    return "\n".join(lines)


def _exercise_data(ex: ExerciseResult) -> dict[str, Any]:
    return {
        "number": ex.number,
        "slug": ex.slug,
        "title": ex.title,
        "seed": ex.seed,
        "score": ex.score,
        "max_score": ex.max_score,
        "hidden_run": ex.hidden_run,
        "grader_error": bool(ex.error),
        "not_run": [c.name for c in lt.not_run(ex)],
    }


def to_gradescope(run: RunResult) -> dict[str, Any]:
    """The ``results.json`` document for ``run`` (a new dict; ``run`` is not touched).

    An incomplete run (grading was interrupted) has no ``score`` and no tests: nothing in
    it may be taken for a grade (``extra_data.incomplete`` says why)."""
    doc = {
        "score": run.score,
        "execution_time": round(run.duration_s),
        "output": _summary(run),
        "output_format": "text",
        "test_output_format": "text",
        "test_name_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "extra_data": {
            "format": FORMAT_NAME,
            "format_version": GRADESCOPE_FORMAT_VERSION,
            "result_format_version": RESULT_FORMAT_VERSION,
            "grader_version": run.grader_version,
            "jax_version": run.jax_version,
            "seed": run.seed_option,
            "started_at": run.started_at,
            "submission": run.submission,
            "error": run.error,
            "max_score": run.max_score,
            "incomplete": run.incomplete,
            "exercises": [_exercise_data(ex) for ex in run.exercises],
        },
        "tests": ([_run_error_test(run)] if run.error else []) + [t for ex in run.exercises for t in _tests(ex)],
    }
    if run.incomplete:
        del doc["score"]
        doc["tests"] = []
        doc["extra_data"]["exercises"] = []
    return doc


def to_gradescope_json(run: RunResult) -> str:
    """``to_gradescope`` as text: sorted keys, 2-space indent, UTF-8 characters kept, final newline."""
    return json.dumps(to_gradescope(run), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
