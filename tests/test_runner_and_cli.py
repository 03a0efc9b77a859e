"""The runner and the CLI, run for real against a miniature course (tests/minicourse)."""

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader import cli, runner
from grader.manifest import ManifestError, load, parse
from grader.submission import single_file
from grader.testing import count_compiles

MINI = Path(__file__).parent / "minicourse"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def course(tmp_path):
    """A writable copy of the mini course."""
    dst = tmp_path / "course"
    shutil.copytree(MINI, dst)
    return dst


def grade_file(course, source=None, seed=None, hidden=True):
    manifest = load(course / "exercises" / "manifest.toml")
    snapshots = None
    if source is not None:
        path = course / "sub" / "double.py"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(source if isinstance(source, bytes) else source.encode("utf-8"))
        snapshots = {1: single_file(path, "double.py")}
    run = runner.grade(manifest, [1], course_root=course, snapshots=snapshots, seed=seed,
                       hidden_root=course / "solutions" if hidden else None)
    return run.exercises[0]


SOLUTION = (MINI / "solutions" / "01_double" / "double.py").read_text()


def test_solution_full_marks_and_stub_zero(course):
    good = grade_file(course, SOLUTION)
    assert (good.score, good.max_score) == (4, 4) and good.all_passed
    stub = grade_file(course)
    assert stub.score == 0
    assert all("not implemented" in c.message for c in stub.checks)


@pytest.mark.parametrize("encoded", [
    b"\xef\xbb\xbf" + SOLUTION.encode("utf-8"),  # a UTF-8 byte-order mark, as some editors write
    ("# -*- coding: latin-1 -*-\n# r\xe9sum\xe9: doubles its input\n" + SOLUTION).encode("latin-1"),
    ("# coding: utf-8\n# caf\u00e9 \u2713\n" + SOLUTION).encode("utf-8"),
], ids=["bom", "latin1_coding_line", "utf8_coding_line"])
def test_a_right_file_in_any_encoding_python_accepts_gets_full_marks(course, encoded):
    """Source is decoded as Python decodes it (PEP 263, BOM), so the compile checks find the
    learner's jitted function in it."""
    result = grade_file(course, encoded)
    assert (result.score, result.max_score) == (4, 4), [(c.name, c.message) for c in result.checks]


def test_same_submission_same_result(course):
    a = grade_file(course, SOLUTION + "\n# v1\n")
    b = grade_file(course, SOLUTION + "\n# v1\n")
    assert a.seed == b.seed
    assert [(c.status, c.score, c.message) for c in a.checks] == [(c.status, c.score, c.message) for c in b.checks]
    assert a.seed != grade_file(course, SOLUTION + "\n# v2\n").seed  # an edit draws new inputs


def test_a_selection_runs_those_checks_and_what_they_require_and_starts_no_unneeded_sandbox(course, monkeypatch):
    monkeypatch.setenv("GRADER_NO_MEMO", "1")  # every worker a check needs starts (none answers from memory)
    started = []
    real_start = runner.Sandbox.start
    monkeypatch.setattr(runner.Sandbox, "start", lambda self: started.append(self) or real_start(self))
    manifest = load(course / "exercises" / "manifest.toml")
    path = course / "sub" / "double.py"
    path.parent.mkdir()
    path.write_text(SOLUTION)
    run = runner.grade(manifest, [1], course_root=course, snapshots={1: single_file(path, "double.py")},
                       hidden_root=course / "solutions", only={1: ["compiles_once"]})
    status = {c.name: c.status for c in run.exercises[0].checks}
    assert status == {"doubles_public": "not_run", "doubles": "passed", "compiles_once": "passed"}
    # the hidden sandbox, and the reference solution's beside it (compiles_once judges against
    # its costs); nothing for the public checks, none of which was selected
    assert sorted(Path(box.snapshot.display_path).parent.name for box in started) == ["01_double", "sub"]
    started.clear()
    runner.grade(manifest, [1], course_root=course, snapshots={1: single_file(path, "double.py")},
                 hidden_root=course / "solutions", only={1: ["doubles"]})
    assert len(started) == 1  # no selected check uses the reference: it never starts
    with pytest.raises(ValueError, match="no check nonsense"):
        runner.grade(manifest, [1], course_root=course, hidden_root=course / "solutions", only={1: ["nonsense"]})


def test_requires_gates_structural_points(course):
    wrong = "import jax\n\n@jax.jit\ndef double(x):\n    return 3 * x\n"
    ex = grade_file(course, wrong, seed=5)
    by = {c.name: c for c in ex.checks}
    assert not by["doubles"].passed
    assert by["compiles_once"].score == 0 and by["compiles_once"].status == "blocked"
    assert "scores only once `doubles` passes" in by["compiles_once"].message


def test_hidden_raw_assertions_are_masked(course):
    # Compiles once by the log, but the test's raw `assert` on by_name fails: its text must not leak.
    hidden = course / "solutions" / "01_double" / "test_hidden.py"
    hidden.write_text(hidden.read_text().replace('compiles.names() == ["double"]', 'compiles.names() == ["x"]'))
    ex = grade_file(course, SOLUTION)
    check = {c.name: c for c in ex.checks}["compiles_once"]
    assert check.message == "repeated calls with one shape compiled again"  # the manifest's feedback
    assert "raw assertion text" in check.private  # kept for the instructor
    assert "raw assertion text" not in json.dumps(ex.to_dict())


def test_hidden_checks_reveal_no_measured_or_expected_values(course):
    # `triple` instead of `double`: the hidden check's expect_close knows the values and the
    # shape it drew; the learner reads only the feedback written for the check.
    ex = grade_file(course, SOLUTION.replace("2 * x", "3 * x"), seed=3)
    check = {c.name: c for c in ex.checks}["doubles"]
    assert not check.passed and check.message == "some random array was not doubled exactly"
    assert (check.measured, check.expected, check.detail) == ("", "", "")
    assert "largest difference" in check.private and "rtol" in check.private
    learner_view = json.dumps(check.to_dict())
    assert "largest difference" not in learner_view and "rtol" not in learner_view
    assert "largest difference" in json.dumps(check.to_dict(private=True))


def test_hidden_check_names_the_kind_of_learner_failure_only(course):
    bad = SOLUTION.replace("2 * x", "x.reshape(7, -1)")  # raises, quoting the drawn shape
    check = {c.name: c for c in grade_file(course, bad, seed=3).checks}["doubles"]
    assert check.message.startswith("your code raised") and "reshape" not in check.message
    assert check.file.endswith("double.py") and check.line > 0
    assert "reshape" in check.private


def test_grader_crash_becomes_a_result(course):
    (course / "solutions" / "01_double" / "test_hidden.py").unlink()  # the course lost a hidden file
    ex = grade_file(course, SOLUTION)
    assert ex.error.startswith("grader error") and "test_hidden.py" not in ex.error
    assert "test_hidden.py" in ex.private and "FileNotFoundError" in ex.private
    assert ex.score == 0 and all(c.status == "error" for c in ex.checks)


def test_public_only_run_says_so(course):
    ex = grade_file(course, SOLUTION, hidden=False)
    assert not ex.hidden_run
    assert [c.status for c in ex.checks] == ["passed", "not_run", "not_run"]
    assert ex.max_score == 0


def test_checks_come_from_the_course_not_the_submission(course):
    # A submission folder with its own (always-passing) test files and conftest changes nothing.
    sub = course / "sub"
    sub.mkdir()
    (sub / "test_public.py").write_text("def test_doubles_public():\n    pass\n")
    (sub / "conftest.py").write_text("raise SystemExit(0)\n")
    ex = grade_file(course, "def double(x):\n    raise NotImplementedError\n")
    assert ex.score == 0 and not any(c.passed for c in ex.checks)


def test_manifest_validation_messages():
    base = {"format_version": 1, "exercise": [{
        "number": 1, "slug": "s", "dir": "d", "title": "t", "files": ["f.py"], "timeout_s": 5, "memory_mb": 100,
        "hints": ["a", "b"], "checks": [{"name": "c", "visibility": "public", "points": 1, "summary": "s"}]}]}
    with pytest.raises(ManifestError, match="public checks carry 0 points"):
        parse(base, Path("m.toml"))
    base["exercise"][0]["checks"][0].update(points=0, requires=["nope"])
    with pytest.raises(ManifestError, match="requires unknown"):
        parse(base, Path("m.toml"))
    with pytest.raises(ManifestError, match="format_version"):
        parse({"format_version": 99}, Path("m.toml"))


def test_real_manifest_is_consistent():
    manifest = load(REPO / "exercises" / "manifest.toml")
    assert [e.number for e in manifest.exercises] == list(range(1, len(manifest.exercises) + 1))
    for ex in manifest.exercises:
        for f in ex.files:
            assert (REPO / "exercises" / ex.dir / f).is_file()
            assert (REPO / "solutions" / ex.dir / f).is_file()
        assert (REPO / "exercises" / ex.dir / "test_public.py").is_file()
        assert (REPO / "solutions" / ex.dir / "test_hidden.py").is_file()
        assert any(c.visibility == "hidden" and c.points > 0 for c in ex.checks)


# --- CLI ---------------------------------------------------------------------------------

@pytest.fixture
def cli_course(course, monkeypatch):
    monkeypatch.setenv("GRADER_COURSE", str(course))
    return course


def invoke(*args):
    return CliRunner().invoke(cli.main, list(args), catch_exceptions=False)


def test_cli_list_json(cli_course):
    result = invoke("list", "--json")
    assert result.exit_code == 0
    data = json.loads(result.output)
    first = {k: data["exercises"][0][k] for k in ("number", "slug", "title", "files", "max_score")}
    assert first == {"number": 1, "slug": "double", "title": "Double it", "files": ["exercises/01_double/double.py"],
                     "max_score": 4}
    assert data["exercises"][0]["state"] == "not_graded"  # no .git, no .grade/stubs: no original to compare
    assert [e["number"] for e in data["exercises"]] == [1, 2]


def test_cli_unknown_exercise_is_a_usage_error(cli_course):
    result = invoke("exercise", "7")
    assert result.exit_code == 2 and "there is no exercise 7" in result.output


def test_cli_exercise_json_and_exit_codes(cli_course):
    result = invoke("exercise", "1", "--json", "--seed", "3")
    assert result.exit_code == 1
    data = json.loads(result.output)
    ex = data["exercises"][0]
    assert data["format_version"] == 4 and data["seed"] == 3 and ex["seed"] == 3
    assert {"number", "title", "files", "score", "max_score", "checks"} <= set(ex)
    assert {"name", "passed", "score", "max_score"} <= set(ex["checks"][0])
    shutil.copy(cli_course / "solutions" / "01_double" / "double.py", cli_course / "exercises" / "01_double")
    assert invoke("exercise", "1").exit_code == 0


def test_cli_grades_another_submission(cli_course, tmp_path):
    fork = tmp_path / "fork"
    (fork / "exercises" / "01_double").mkdir(parents=True)
    shutil.copy(cli_course / "solutions" / "01_double" / "double.py", fork / "exercises" / "01_double")
    (fork / "exercises" / "02_triple").mkdir(parents=True)
    shutil.copy(cli_course / "solutions" / "02_triple" / "triple.py", fork / "exercises" / "02_triple")
    result = invoke("all", "--submission", str(fork), "--json")
    assert result.exit_code == 0 and json.loads(result.output)["score"] == 6


def test_a_hang_in_one_exercise_costs_only_that_exercise(cli_course, tmp_path):
    fork = tmp_path / "fork"
    (fork / "exercises" / "01_double").mkdir(parents=True)
    (fork / "exercises" / "02_triple").mkdir(parents=True)
    (fork / "exercises" / "01_double" / "double.py").write_text("def double(x):\n    while True:\n        pass\n")
    shutil.copy(cli_course / "solutions" / "02_triple" / "triple.py", fork / "exercises" / "02_triple")
    cli_course.joinpath("exercises", "manifest.toml").write_text(
        cli_course.joinpath("exercises", "manifest.toml").read_text().replace("timeout_s = 20", "timeout_s = 3", 1))
    result = invoke("all", "--submission", str(fork), "--json")
    data = json.loads(result.output)
    assert result.exit_code == 1
    first, second = data["exercises"]
    assert first["score"] == 0 and "ran out of time" in first["checks"][0]["message"]
    assert second["score"] == second["max_score"] == 2


def test_cli_terminal_report_names_checks_and_seed(cli_course):
    result = invoke("exercise", "1", "--seed", "11")
    assert "doubles_public" in result.output and "--seed 11" in result.output
    assert "not implemented" in result.output


def test_cli_public_only_says_public_checks(cli_course):
    shutil.copy(cli_course / "solutions" / "01_double" / "double.py", cli_course / "exercises" / "01_double")
    result = invoke("exercise", "1", "--public-only")
    assert result.exit_code == 0 and "public checks passed" in result.output


def test_cli_hints_progress_and_reset(cli_course):
    first = invoke("hint", "1").output
    assert "Hint 1/2" in first and "Hint 2/2" not in first
    second = invoke("hint", "1").output
    assert "Hint 2/2" in second and "last hint" in second
    invoke("hint", "1", "--reset")
    assert "Hint 2/2" not in invoke("hint", "1").output
    assert "Hint 2/2" in invoke("hint", "1", "--all").output


def test_cli_broken_manifest_is_exit_3(cli_course):
    (cli_course / "exercises" / "manifest.toml").write_text("format_version = 1\n[[exercise]]\nnumber = 'x'\n")
    result = CliRunner().invoke(cli.main, ["list"])
    assert result.exit_code == 3 and "manifest is broken" in result.output


def test_real_exercise_3_twice_gives_the_same_score_and_compile_counts(tmp_path):
    """The issue's own example: the reference solution, graded twice, full marks both times."""
    manifest = load(REPO / "exercises" / "manifest.toml")
    sub = tmp_path / "exercises" / "03_per_example_grad_norms"
    sub.mkdir(parents=True)
    shutil.copy(REPO / "solutions" / "03_per_example_grad_norms" / "grad_norms.py", sub)
    runs = [runner.grade(manifest, [3], course_root=REPO, submission_root=tmp_path, hidden_root=REPO / "solutions")
            for _ in range(2)]
    first, second = (r.exercises[0] for r in runs)
    assert first.score == first.max_score == second.score
    assert first.seed == second.seed
    assert [(c.name, c.status, c.measured) for c in first.checks] == [(c.name, c.status, c.measured) for c in second.checks]
    # ... and the same compile counts, measured in two fresh sandboxes.
    import numpy as np

    from grader.sandbox.client import Sandbox

    rng = np.random.default_rng(0)
    params = {"layers": [{"w": rng.normal(size=(3, 4)).astype(np.float32), "b": np.zeros(4, np.float32)}],
              "out": {"w": rng.normal(size=(4, 2)).astype(np.float32), "b": np.zeros(2, np.float32)}}
    calls = [{"args": [params, np.ones((b, 3), np.float32), np.ones((b, 2), np.float32)]} for b in (4, 4, 7)]
    counts = []
    for _ in range(2):
        with Sandbox(sub / "grad_norms.py") as sb:
            _, compiles = count_compiles(sb, None, "per_example_grad_norms", calls)
            counts.append((compiles.attributed, compiles.names()))
    assert counts[0] == counts[1] == (2, ["per_example_grad_norms"])


def test_first_failure_stops_at_the_first_check_that_does_not_pass_and_runs_nothing_after_it(course):
    """What `grade verify` asks of a fixture's public checks: that one fails (not which)."""
    wrong = SOLUTION.replace("2 * x", "3 * x")
    assert wrong != SOLUTION
    manifest = load(course / "exercises" / "manifest.toml")
    path = course / "sub" / "double.py"
    path.parent.mkdir()
    path.write_text(wrong)
    snap = {1: single_file(path, "double.py")}

    def statuses(**kw):
        run = runner.grade(manifest, [1], course_root=course, snapshots=snap, hidden_root=course / "solutions", **kw)
        return {c.name: (c.status, c.message) for c in run.exercises[0].checks}

    every = statuses()
    assert [s for s, _ in every.values()].count("failed") >= 2 and "not_run" not in [s for s, _ in every.values()]
    first = statuses(first_failure=True)
    failed = [n for n, (s, _) in first.items() if s == "failed"]
    stopped = [n for n, (s, m) in first.items() if s == "not_run" and "stopped at the first check" in m]
    assert len(failed) == 1 and stopped and set(failed) | set(stopped) | {n for n, (s, _) in first.items()
                                                                          if s == "passed"} == set(first)
