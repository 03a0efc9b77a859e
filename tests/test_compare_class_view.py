"""`grade class GRADEBOOK`: the class at a glance, from a gradebook built here (no sandbox).

``class_gradebook`` writes a small class: learners with full marks, partial work, a
learner stuck on one check over four submissions, one who never started an exercise, an
integrity verdict, a grader error, and labels and messages that are hostile (rich markup,
HTML, a spreadsheet formula, terminal escapes).  The browser test renders the same page.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

from click.testing import CliRunner

from grader.compare import class_view, report_class
from grader.compare.cli import class_cmd
from grader.course.gradebook import Gradebook, Grading
from grader.manifest import load
from grader.results import CheckResult, ExerciseResult

REPO = Path(__file__).resolve().parents[1]
HOSTILE_LABEL = '=HYPERLINK("http://x.example")<script>alert(1)</script>[bold]'
HOSTILE_MESSAGE = "[/bold] <img src=http://x.example/a.png> \x1b]8;;http://x.example\x1b\\link\x1b]8;;\x1b\\"


def _result(ex, statuses: dict[str, str], *, digest: str, message: str = "", error: str = "",
            integrity: tuple[str, ...] = ()) -> ExerciseResult:
    checks = tuple(CheckResult(c.name, c.visibility, c.summary, statuses.get(c.name, "passed"),
                               c.points if statuses.get(c.name, "passed") == "passed" else 0, c.points,
                               message=message if statuses.get(c.name, "passed") != "passed" else "")
                   for c in ex.checks)
    return ExerciseResult(ex.number, ex.slug, ex.title, tuple(ex.files), 1, () if error else checks, True,
                          error=error, integrity=integrity, content_digest=digest)


def _scoring_check(ex) -> str:
    return next(c.name for c in ex.checks if c.points)


def class_gradebook(path: Path) -> dict[str, str]:
    """A class in a gradebook; returns what each learner was built to show."""
    manifest = load(REPO / "exercises" / "manifest.toml")
    ex3, ex5 = manifest.get(3), manifest.get(5)
    first3, first5 = _scoring_check(ex3), _scoring_check(ex5)
    not_impl = "not implemented yet: your function still raises NotImplementedError"
    plan = {
        "ada": [(ex3, {}, "a1"), (ex5, {}, "a2")],
        "ben": [(ex3, {c.name: "failed" for c in ex3.checks}, "b1", not_impl)],  # ex 3: the stub; ex 5: nothing
        "cy": [(ex3, {first3: "failed"}, f"c{k}", "still off by a factor") for k in range(4)]
        + [(ex5, {}, "c9")],
        "dee": [(ex3, {first3: "failed"}, "d1", HOSTILE_MESSAGE), (ex5, {first5: "failed"}, "d2", "z differs")],
        HOSTILE_LABEL: [(ex3, {}, "e1"), (ex5, {}, "e2")],
    }
    with Gradebook(path) as book:
        for learner, items in plan.items():
            for k, (ex, statuses, digest, *message) in enumerate(items):
                result = _result(ex, statuses, digest=digest, message=message[0] if message else "",
                                 integrity=("opened a network socket",) if learner == "dee" and ex is ex5 else ())
                book.add(Grading(result, learner, f"name:{learner}", "0.1.0", "0.10.2",
                                 f"2025-01-0{1 + k // 3}T0{k % 3}:00:00+00:00", "test", content_hash=digest))
        book.add(Grading(_result(ex5, {}, digest="f1", error="the grader crashed"), "fay", "name:fay", "0.1.0",
                         "0.10.2", "2025-01-01T00:00:00+00:00", "test", content_hash="f1"))
    return {"ada": "full marks", "ben": "not started", "cy": "stuck", "dee": "integrity", "fay": "grader error"}


def _view(tmp_path: Path) -> dict:
    book = tmp_path / "grades.sqlite"
    class_gradebook(book)
    manifest = load(REPO / "exercises" / "manifest.toml")
    with Gradebook(book, create=False) as gb:
        rows = gb.gradings(history=True)
    return class_view.overview(rows, [(e.number, e.title, e.max_score) for e in manifest.exercises])


def test_learner_by_exercise_statuses(tmp_path):
    view = _view(tmp_path)
    cells = {(c["learner"], c["exercise"]): c for c in view["cells"]}
    assert cells[("ada", 3)]["status"] == "full marks" and cells[("ada", 3)]["score"] == cells[("ada", 3)]["max_score"]
    assert cells[("ben", 3)]["status"] == "not started"  # every check still "not implemented"
    assert cells[("ben", 5)]["status"] == "not started" and cells[("ben", 5)]["score"] is None  # never graded
    assert cells[("dee", 5)]["integrity"] == ["opened a network socket"]
    assert cells[("fay", 5)]["status"] == "grader error"
    assert cells[("cy", 3)]["submissions"] == 4 and cells[("cy", 3)]["status"] == "partial"
    assert len(view["learners"]) == 6 and len(view["cells"]) == 6 * len(view["exercises"])


def test_stuck_and_not_started(tmp_path):
    view = _view(tmp_path)
    stuck = {(s["learner"], s["exercise"]): s for s in view["stuck"]}
    assert set(stuck) == {("cy", 3)}  # dee failed once: not stuck; cy four times in a row
    manifest = load(REPO / "exercises" / "manifest.toml")
    assert stuck[("cy", 3)]["check"] == _scoring_check(manifest.get(3)) and stuck[("cy", 3)]["submissions"] == 4
    assert {"learner": "ben", "exercise": 3} in view["not_started"]
    assert {"learner": "ada", "exercise": 1} in view["not_started"]  # no grading at all


def test_checks_failed_most(tmp_path):
    view = _view(tmp_path)
    top = view["failing_checks"][0]
    manifest = load(REPO / "exercises" / "manifest.toml")
    assert (top["exercise"], top["check"]) == (3, _scoring_check(manifest.get(3)))
    assert top["failed"] == 2 and top["of"] == 4  # cy and dee; ben (not started) is left out
    assert class_view.stuck([]) == ("", 0)


def test_csv_and_html_treat_learner_text_as_data(tmp_path):
    view = _view(tmp_path)
    buf = io.StringIO()
    class_view.write_csv(view, buf)
    rows = list(csv.DictReader(io.StringIO(buf.getvalue())))
    assert len(rows) == len(view["cells"]) and set(rows[0]) == set(class_view.CSV_COLUMNS)
    hostile = [r for r in rows if r["learner"].startswith("'=")]
    assert hostile and all(not r["learner"].startswith("=") for r in rows)  # never a formula
    page = report_class.render(view)
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=http" not in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)
    for section in ('id="matrix"', 'id="failing-table"', 'id="stuck-table"', 'id="not-started"'):
        assert section in page


def test_cli_writes_every_format(tmp_path):
    book = tmp_path / "grades.sqlite"
    class_gradebook(book)
    out = CliRunner().invoke(class_cmd, [str(book), "--html", str(tmp_path / "c.html"), "--csv",
                                         str(tmp_path / "c.csv")])
    assert out.exit_code == 0, out.output
    assert (tmp_path / "c.html").read_text().startswith("<!DOCTYPE html>")
    assert "stuck: cy on exercise 3" in out.output and "\x1b" not in out.output
    data = json.loads(CliRunner().invoke(class_cmd, [str(book), "--json"]).output)
    assert data["format_version"] == class_view.FORMAT_VERSION and data["kind"] == "class-overview"
    assert "learner,exercise,status" in CliRunner().invoke(class_cmd, [str(book), "--csv", "-"]).output
    missing = CliRunner().invoke(class_cmd, [str(tmp_path / "nothing.sqlite")])
    assert missing.exit_code == 2 and "no gradebook" in missing.output
