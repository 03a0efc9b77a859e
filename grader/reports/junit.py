"""JUnit XML, the test-report format CI systems (GitLab, Jenkins, GitHub test reporters) read.

Layout (the widely used Ant/Jenkins/GitLab dialect)::

    <testsuites name="jax-exercises-grader" tests failures errors skipped time>
      <testsuite name="Exercise 3: <title>" tests failures errors skipped time [timestamp]>
        <properties>   format, format_version, grader_version, jax_version, seed,
                       seed_option, score, max_score, hidden_run, submission
        <testcase classname="<exercise slug>" name="<check>" time="0.123">
          <properties> visibility, status, score, max_score
          <failure message="first line" type="failed">learner-facing text</failure>
          | <error message=... type="grader-error">...</error>
          | <skipped message="..."/>

* ``failed`` -> ``<failure>``; ``error`` (the grader's fault) -> ``<error>``;
  ``not_run`` -> ``<skipped>``; ``passed`` -> no child but its properties.
* An exercise the grader could not grade keeps its test cases (as errors, with the
  error text first); if none of them is an error, a ``(grading)`` test case carries it.
* When grading could not run at all (``RunResult.error``), a first ``Grading`` suite
  holds one ``(grading)`` test case with that error.
* Bodies are ``grader.reports.learner_text.check_text``: never a ``private`` field and
  never the learner's stdout.  Characters XML 1.0 cannot hold (control characters such as
  an ANSI escape in a traceback) are written as ``\\xNN``, and line ends as ``\\n``.
* Byte-for-byte stable: attribute order is fixed, times are the recorded durations with
  three decimals, and the only timestamp is ``RunResult.started_at``.
"""

from __future__ import annotations

import dataclasses

import re
import xml.etree.ElementTree as ET

from grader.reports import learner_text as lt
from grader.results import (
    BLOCKED,
    ERROR,
    FAILED,
    INTEGRITY,
    NOT_RUN,
    CheckResult,
    ExerciseResult,
    RunResult,
)

#: Bumped whenever the layout of ``to_junit_xml``'s output changes.
JUNIT_FORMAT_VERSION = 1
FORMAT_NAME = f"{lt.TOOL}/junit"

# XML 1.0 allows tab, newline, carriage return and these ranges; everything else is escaped.
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _clean(text: str) -> str:
    """Line ends as ``\\n`` (what an XML parser makes of them anyway); what XML cannot hold as ``\\xNN``."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _time(seconds: float) -> str:
    return f"{max(seconds, 0.0):.3f}"


def _properties(parent: ET.Element, pairs: list[tuple[str, object]]) -> None:
    props = ET.SubElement(parent, "properties")
    for name, value in pairs:
        text = "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        ET.SubElement(props, "property", name=name, value=_clean(text))


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _testcase(suite: ET.Element, ex: ExerciseResult, check: CheckResult) -> str:
    case = ET.SubElement(suite, "testcase", classname=_clean(ex.slug), name=_clean(check.name),
                         time=_time(check.duration_s))
    _properties(case, [("visibility", check.visibility), ("status", check.status),
                       ("score", check.score), ("max_score", check.max_score)])
    if check.status == NOT_RUN:
        ET.SubElement(case, "skipped", message=_clean(check.message or "not run"))
        return NOT_RUN
    if check.status in (FAILED, BLOCKED, INTEGRITY, ERROR):
        text = lt.check_text(ex, check)
        tag, kind = ("error", "grader-error") if check.status == ERROR else ("failure", check.status)
        first = _first_line(ex.error) if ex.error else _first_line(lt.printable(check.message))
        node = ET.SubElement(case, tag, message=_clean(first), type=kind)
        node.text = _clean(text)
        return ERROR if check.status == ERROR else FAILED
    return check.status


def _testsuite(parent: ET.Element, index: int, ex: ExerciseResult, run: RunResult) -> dict[str, int]:
    attrs = {"name": _clean(f"Exercise {ex.number}: {ex.title}"), "id": str(index)}
    if run.started_at:
        attrs["timestamp"] = run.started_at
    suite = ET.SubElement(parent, "testsuite", attrs)
    _properties(suite, [
        ("format", FORMAT_NAME), ("format_version", JUNIT_FORMAT_VERSION),
        ("grader_version", run.grader_version), ("jax_version", run.jax_version),
        ("seed", ex.seed), ("seed_option", run.seed_option),
        ("score", ex.score), ("max_score", ex.max_score), ("hidden_run", ex.hidden_run),
        ("submission", run.submission),
    ])
    outcomes = [_testcase(suite, ex, c) for c in ex.checks]
    if ex.error and ERROR not in outcomes:
        case = ET.SubElement(suite, "testcase", classname=_clean(ex.slug), name="(grading)", time=_time(0.0))
        node = ET.SubElement(case, "error", message=_clean(_first_line(ex.error)), type="grader-error")
        node.text = _clean(ex.error)
        outcomes.append(ERROR)
    counts = {"tests": len(outcomes), "failures": outcomes.count(FAILED), "errors": outcomes.count(ERROR),
              "skipped": outcomes.count(NOT_RUN)}
    # Counts go before the children in the file but are known only after them: set them now,
    # in a fixed order after name/id/timestamp.
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("time", _time(ex.duration_s))
    return counts


def _run_error_suite(parent: ET.Element, run: RunResult) -> dict[str, int]:
    attrs = {"name": "Grading", "id": "grading"}
    if run.started_at:
        attrs["timestamp"] = run.started_at
    suite = ET.SubElement(parent, "testsuite", attrs)
    _properties(suite, [("format", FORMAT_NAME), ("format_version", JUNIT_FORMAT_VERSION),
                        ("grader_version", run.grader_version), ("jax_version", run.jax_version),
                        ("submission", run.submission)])
    case = ET.SubElement(suite, "testcase", classname="grading", name="(grading)", time=_time(0.0))
    node = ET.SubElement(case, "error", message=_clean(_first_line(run.error)), type="grader-error")
    node.text = _clean(run.error)
    counts = {"tests": 1, "failures": 0, "errors": 1, "skipped": 0}
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("time", _time(0.0))
    return counts


def to_junit_xml(run: RunResult) -> str:
    """The JUnit XML document for ``run``, as text (UTF-8 declaration, 2-space indent, final newline).

    Blocked and integrity checks are failures (``type`` says which); an incomplete run (grading
    was interrupted) is one error and nothing else: no check of it may be taken for a grade."""
    root = ET.Element("testsuites", name=lt.TOOL)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if run.error or run.incomplete:
        if run.incomplete:
            run = dataclasses.replace(run, error=lt.INCOMPLETE)
        for key, value in _run_error_suite(root, run).items():
            totals[key] += value
    for i, ex in enumerate(() if run.incomplete else run.exercises):
        for key, value in _testsuite(root, i, ex, run).items():
            totals[key] += value
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", _time(run.duration_s))
    ET.indent(root, space="  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
