"""The report writers (grader/reports/) on a hand-built result: golden files, privacy, purity, formats.

No grading happens here (tests/report_samples.py builds the result), so the file runs in
well under a second.

Golden files live in tests/golden/.  After an intended change to a writer, regenerate them
with ``UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/test_reports.py`` and review the
diff (bump the writer's format version when the shape changed).
"""

from __future__ import annotations

import copy
import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from report_samples import (
    EX1_FILE,
    HIDDEN_DETAIL,
    ROOT,
    RUN_ERROR,
    SECRET,
    STDOUT,
    TRICKY_MESSAGE,
    nothing_graded_run,
    sample_run,
)

from grader import render
from grader.reports import (
    GITHUB_ANNOTATIONS_FORMAT_VERSION,
    GITHUB_SUMMARY_FORMAT_VERSION,
    GRADESCOPE_FORMAT_VERSION,
    JUNIT_FORMAT_VERSION,
    learner_text,
)
from grader.reports.github import (
    annotations,
    escape_data,
    escape_property,
    job_summary,
    md_fence,
    md_inline,
    write_summary,
)
from grader.reports.gradescope import to_gradescope, to_gradescope_json
from grader.reports.junit import to_junit_xml
from grader.results import ERROR, FAILED, NOT_RUN, RunResult

HERE = Path(__file__).parent
GOLDEN = HERE / "golden"
SCHEMA = json.loads((HERE / "schemas" / "gradescope-results.schema.json").read_text())

#: Every learner-facing writer, as text.
WRITERS = {
    "gradescope-results.json": to_gradescope_json,
    "junit.xml": to_junit_xml,
    "github-summary.md": job_summary,
    "github-annotations.txt": lambda run: "\n".join(annotations(run, Path(ROOT))) + "\n",
}
#: ... and the grader's own learner JSON, which keeps its golden file beside them.
ALL_OUTPUTS = {**WRITERS, "grader-result.json": lambda run: render.to_json(run) + "\n"}


@pytest.fixture(scope="module")
def run() -> RunResult:
    return sample_run()


# ----------------------------------------------------------------------------- golden files

@pytest.mark.parametrize("name", sorted(ALL_OUTPUTS))
def test_output_matches_golden_file(run, name):
    text = ALL_OUTPUTS[name](run)
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_bytes(text.encode("utf-8"))
    assert path.exists(), f"{path} is missing: run with UPDATE_GOLDEN=1 to create it"
    assert text.encode("utf-8") == path.read_bytes(), (
        f"{name} differs from {path}; if the change is intended, regenerate with UPDATE_GOLDEN=1 and review the diff")


# ----------------------------------------------------------------------------- privacy and purity

@pytest.mark.parametrize("name", sorted(ALL_OUTPUTS))
def test_private_text_reaches_no_report(run, name):
    assert SECRET in repr(run)  # the marker really is in the input ...
    assert SECRET not in ALL_OUTPUTS[name](run)  # ... and in no learner-facing output


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_writers_show_no_hidden_details_nor_learner_stdout(run, name):
    out = WRITERS[name](run)
    assert HIDDEN_DETAIL not in out and STDOUT not in out
    assert "at least one predicted compile count differs" in out  # the hidden check's authored message is shown


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_writers_are_pure(run, name):
    before = copy.deepcopy(run)
    first, second = WRITERS[name](run), WRITERS[name](run)
    assert first == second
    assert run == before
    assert WRITERS[name](sample_run()) == first  # an equal result, built again, gives the same bytes


def test_gradescope_dict_is_fresh_each_call(run):
    doc = to_gradescope(run)
    doc["tests"][0]["score"] = 999
    doc["extra_data"]["exercises"].clear()
    assert to_gradescope(run)["tests"][0]["score"] == 0
    assert to_gradescope(run)["extra_data"]["exercises"]


# ----------------------------------------------------------------------------- Gradescope

def test_gradescope_output_satisfies_the_schema(run):
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.Draft202012Validator(SCHEMA).validate(json.loads(to_gradescope_json(run)))


@pytest.mark.parametrize("breakage", [
    "visibility", "test_visibility", "status", "output_format", "no_score", "score_type", "typo_key",
])
def test_schema_rejects_a_broken_document(run, breakage):
    doc = to_gradescope(run)
    if breakage == "visibility":
        doc["visibility"] = "public"
    elif breakage == "test_visibility":
        doc["tests"][2]["visibility"] = "after_publish"
    elif breakage == "status":
        doc["tests"][1]["status"] = "error"
    elif breakage == "output_format":
        doc["output_format"] = "markdown"
    elif breakage == "no_score":  # neither a top-level score nor a score on every test
        del doc["score"]
        del doc["tests"][0]["score"]
    elif breakage == "score_type":
        doc["score"] = "2"
    elif breakage == "typo_key":
        doc["tests"][0]["max_points"] = 3
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(SCHEMA).validate(doc)


def test_gradescope_scores_visibility_and_numbering(run):
    doc = to_gradescope(run)
    assert doc["score"] == run.score == sum(t["score"] for t in doc["tests"]) == 2
    assert doc["extra_data"]["max_score"] == run.max_score == sum(t["max_score"] for t in doc["tests"]) == 12
    assert doc["extra_data"]["format_version"] == GRADESCOPE_FORMAT_VERSION
    assert (doc["extra_data"]["grader_version"], doc["extra_data"]["jax_version"]) == ("0.1.0", "0.10.2")
    by_name = {t["name"]: t for t in doc["tests"]}
    assert by_name["Exercise 1 \u00b7 serves_small_workload"]["visibility"] == "visible"
    hidden = by_name["Exercise 1 \u00b7 predicts_random_sequences"]
    assert (hidden["visibility"], hidden["status"], hidden["number"]) == ("after_published", "failed", "1.3")
    numbers = [t["number"] for t in doc["tests"]]
    assert len(numbers) == len(set(numbers))
    # not-run checks are left out of the tests but named in the summary and the extra data
    assert not any("matches_on_random_batches" in t["name"] for t in doc["tests"])
    assert "matches_on_random_batches" in doc["output"]
    assert doc["extra_data"]["exercises"][2]["not_run"] == ["matches_on_random_batches"]


def test_gradescope_shows_grader_errors(run):
    doc = to_gradescope(run)
    error = run.exercises[1].error
    ex2 = [t for t in doc["tests"] if t["name"].startswith("Exercise 2 ")]
    assert len(ex2) == 2 and all(t["score"] == 0 and t["output"].startswith(error) for t in ex2)
    ex4 = [t for t in doc["tests"] if t["name"].startswith("Exercise 4 ")]  # every check not run: one test says why
    assert [(t["name"], t["status"], t["output"]) for t in ex4] == [("Exercise 4 \u00b7 grading", "failed", error)]


def test_gradescope_public_check_output_has_measured_expected_and_hint(run):
    test = next(t for t in to_gradescope(run)["tests"] if t["name"].endswith("serves_small_workload"))
    assert test["output"].startswith(learner_text.printable(TRICKY_MESSAGE))  # line ends normalised, control codes shown
    for part in ("measured: 6 compilations", "expected: at most 2", "try: keep `mode` static",
                 "where: recompile.py, line 42", "ValueError: bad <shape>"):
        assert part in test["output"]


# ----------------------------------------------------------------------------- JUnit

def test_junit_parses_with_the_right_counts(run):
    root = ET.fromstring(to_junit_xml(run).encode("utf-8"))
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == len(run.exercises)
    for suite, ex in zip(suites, run.exercises):
        statuses = [c.status for c in ex.checks]
        grading_case = 1 if ex.error and ERROR not in statuses else 0
        expected = {"tests": len(statuses) + grading_case, "failures": statuses.count(FAILED),
                    "errors": statuses.count(ERROR) + grading_case, "skipped": statuses.count(NOT_RUN)}
        assert {k: int(suite.get(k)) for k in expected} == expected
        cases = suite.findall("testcase")
        assert len(cases) == expected["tests"]
        assert len(suite.findall("testcase/failure")) == expected["failures"]
        assert len(suite.findall("testcase/error")) == expected["errors"]
        assert len(suite.findall("testcase/skipped")) == expected["skipped"]
        assert {c.get("classname") for c in cases} == {ex.slug}
        props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
        assert props["format_version"] == str(JUNIT_FORMAT_VERSION)
        assert (props["grader_version"], props["jax_version"], props["seed"]) == ("0.1.0", "0.10.2", str(ex.seed))
        assert (int(props["score"]), int(props["max_score"])) == (ex.score, ex.max_score)
    assert int(root.get("tests")) == sum(int(s.get("tests")) for s in suites) == 12
    assert sum(int(s.find("properties/property[@name='score']").get("value")) for s in suites) == run.score


def test_junit_failure_carries_the_learner_text(run):
    root = ET.fromstring(to_junit_xml(run).encode("utf-8"))
    case = root.find("testsuite/testcase[@name='serves_small_workload']")
    failure = case.find("failure")
    assert failure.get("message") == TRICKY_MESSAGE.splitlines()[0]
    assert "expected: at most 2" in failure.text
    assert "\\x1b[31mValueError" in failure.text  # the ANSI escape XML cannot hold, shown instead
    assert case.get("time") == "1.500"


# ----------------------------------------------------------------------------- GitHub

_COMMAND = re.compile(r"^::(?P<kind>\w+)(?: (?P<props>[^:]*))?::(?P<message>.*)$")


def _unescape(text: str) -> str:
    return (text.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",")
            .replace("%25", "%"))


def parse_command(line: str) -> tuple[str, dict[str, str], str]:
    """Read a workflow command back the way the runner does."""
    m = _COMMAND.match(line)
    assert m, line
    props = dict(p.split("=", 1) for p in m["props"].split(",")) if m["props"] else {}
    return m["kind"], {k: _unescape(v) for k, v in props.items()}, _unescape(m["message"])


@pytest.mark.parametrize("text", ["plain", TRICKY_MESSAGE, "100%0A is not a newline", "a:b,c%2C::d\r\n\n%%"])
def test_workflow_command_escaping_round_trips(text):
    kind, props, message = parse_command(f"::error title={escape_property(text)}::{escape_data(text)}")
    assert (kind, props, message) == ("error", {"title": text}, text)


def test_annotations_point_at_the_learner_file(run):
    lines = annotations(run, Path(ROOT))
    assert all("\n" not in line and "\r" not in line for line in lines)
    parsed = [parse_command(line) for line in lines]
    errors = [(p, m) for kind, p, m in parsed if kind == "error"]
    first, message = errors[0]
    assert first == {"file": "exercises/01_recompile_counting/recompile.py", "line": "42",
                     "title": "Exercise 1 \u00b7 serves_small_workload"}
    assert message.startswith(learner_text.printable(TRICKY_MESSAGE)) and "expected: at most 2" in message
    # a hidden check: its own line, its authored message only
    assert errors[1][0]["line"] == "17" and errors[1][1] == "at least one predicted compile count differs from live JAX"
    # two checks failing the same way on a stub: one annotation naming both, on the file, without a line
    stub = errors[2][0]
    assert stub == {"file": "exercises/03_per_example_grad_norms/grad_norms.py",
                    "title": "Exercise 3 \u00b7 matches_one_at_a_time, compiles_once"}
    assert len(errors) == 3
    # the grader's own failures are warnings with no file: the learner's code is not at fault
    warnings = [(p, m) for kind, p, m in parsed if kind == "warning"]
    assert [p["title"] for p, _ in warnings] == ["Exercise 1 \u00b7 workload_within_compile_budget",
                                                 "Exercise 2 \u00b7 Diagnosing retraces: not graded",
                                                 "Exercise 4 \u00b7 Reading a jaxpr: not graded"]
    assert all("file" not in p for p, _ in warnings)
    kind, props, notice = parsed[-1]
    assert (kind, props["title"]) == ("notice", "Grade")
    assert notice.startswith(f"{run.score}/{run.max_score} points")
    assert f"annotations v{GITHUB_ANNOTATIONS_FORMAT_VERSION}" in notice


def test_annotations_without_a_file_inside_the_checkout(run):
    parsed = [parse_command(line) for line in annotations(run, Path("/somewhere/else"))]
    errors = [(p, m) for kind, p, m in parsed if kind == "error"]
    assert errors and all("file" not in p and "line" not in p for p, _ in errors)
    assert "where: recompile.py, line 42" in errors[0][1]  # the place moves into the message instead


def test_annotation_paths_are_relative_to_a_relative_root(run, monkeypatch):
    monkeypatch.chdir("/")
    parsed = [parse_command(line) for line in annotations(run, Path(str(ROOT).lstrip("/")))]
    assert parsed[0][1]["file"] == str(Path(EX1_FILE).relative_to(ROOT))


def test_job_summary_layout(run):
    md = job_summary(run)
    assert md.splitlines()[0] == f"<!-- jax-exercises-grader summary v{GITHUB_SUMMARY_FORMAT_VERSION} -->"
    assert f"## Grade: {run.score}/{run.max_score} points" in md
    # the title's markup characters are escaped, so the table keeps its 5 columns
    row = next(line for line in md.splitlines() if line.startswith("| \u274c | 3 |"))
    assert "&lt;grad&gt; norms \\| vmap &amp; \\*jit\\*" in row
    assert len(re.findall(r"(?<!\\)\|", row)) == 6
    # free text sits in a fence longer than any backtick run inside it, control characters made visible
    assert "````text\n" + TRICKY_MESSAGE.replace("\r\n", "\n") in md
    assert "\x1b" not in md and "\\x1b[31m" in md
    assert "workload\\_outputs\\_correct" in md  # passing checks are listed in the collapsed table


def test_md_fence_outgrows_backticks():
    assert md_fence("a ```` b") == "`````text\na ```` b\n`````"
    assert md_fence("plain") == "```text\nplain\n```"


def test_write_summary_appends(run, tmp_path):
    path = tmp_path / "summary.md"
    write_summary(run, path)
    write_summary(run, path)
    text = path.read_text(encoding="utf-8")
    assert text == job_summary(run) + "\n" + job_summary(run)


def test_learner_text_hides_what_a_hidden_check_measured(run):
    hidden = run.exercises[0].checks[2]
    assert hidden.visibility == "hidden" and hidden.measured == HIDDEN_DETAIL
    text = learner_text.check_text(run.exercises[0], hidden)
    assert HIDDEN_DETAIL not in text and SECRET not in text
    public = run.exercises[0].checks[1]
    assert "measured: 6 compilations" in learner_text.check_text(run.exercises[0], public)


# ----------------------------------------------------------------------------- nothing graded

def test_every_writer_reports_a_run_that_could_not_grade():
    run = nothing_graded_run()
    doc = json.loads(to_gradescope_json(run))
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    assert doc["score"] == 0 and doc["output"].startswith(RUN_ERROR)
    assert [(t["name"], t["status"], t["output"]) for t in doc["tests"]] == [("Grading", "failed", RUN_ERROR)]
    root = ET.fromstring(to_junit_xml(run).encode("utf-8"))
    assert (root.get("tests"), root.get("errors")) == ("1", "1")
    assert root.find("testsuite/testcase/error").text == RUN_ERROR
    md = job_summary(run)
    assert "## Grade: 0/0 points" in md and md_inline(RUN_ERROR) in md and "No exercise was graded." in md
    parsed = [parse_command(line) for line in annotations(run, Path(ROOT))]
    assert parsed[0] == ("warning", {"title": "Grading"}, RUN_ERROR)
    assert parsed[-1][0] == "notice"


def test_verbose_terminal_output_says_when_printed_output_was_cut(run):
    from io import StringIO

    from rich.console import Console

    import dataclasses

    ex = dataclasses.replace(run.exercises[0], output="".join(f"line {i}\n" for i in range(1000)))
    out = StringIO()
    render.print_exercise(ex, Console(file=out, width=200), verbose=True)
    text = out.getvalue()
    assert "line 999" in text and "line 0\n" not in text
    assert re.search(r"\.\.\. \[\d+ earlier characters cut", text)
