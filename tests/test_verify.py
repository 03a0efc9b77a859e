"""`grade verify` on the mini course: fixtures as base + mistake, and what it reports."""

import shutil
from pathlib import Path

import pytest

from grader.course import verify
from grader.manifest import load

MINI = Path(__file__).parent / "minicourse"


@pytest.fixture
def course(tmp_path):
    dst = tmp_path / "course"
    shutil.copytree(MINI, dst)
    return dst


def add_fixture(course, name, toml, code):
    folder = course / "fixtures" / "01_double" / name
    folder.mkdir(parents=True)
    (folder / "fixture.toml").write_text(toml)
    (folder / "double.py").write_text(code)
    return folder


def test_base_fixture_is_the_base_plus_the_mistake(course):
    ex = load(course / "exercises" / "manifest.toml").get(1)
    folder = add_fixture(course, "triples", 'base = "solution"\nkind = "wrong"\nmust_fail = ["doubles"]\n',
                         "@jax.jit\ndef double(x):\n    return 3 * x\n")
    source = verify.fixture_source(ex, course, folder)
    assert source.startswith((course / "solutions" / "01_double" / "double.py").read_text())
    assert source.rstrip().endswith("return 3 * x")
    cases = [c for c in verify.cases_for(ex, course, seeds=3)[0] if c.label.startswith("fixture:triples")]
    assert len(cases) == 3 and len({c.seed for c in cases}) == 3  # one fixture, graded at three seeds
    for case in cases:
        outcome = verify._run_case(str(course / "exercises" / "manifest.toml"), str(course), case)
        assert outcome.ok and outcome.score == 0


def test_a_fixture_that_declares_a_public_check_lost_shows_public_checks_catch_it_in_its_own_grading(course):
    ex = load(course / "exercises" / "manifest.toml").get(1)
    add_fixture(course, "triples", 'base = "solution"\nkind = "wrong"\nmust_fail = ["doubles_public", "doubles"]\n',
                "@jax.jit\ndef double(x):\n    return 3 * x\n")
    add_fixture(course, "hidden_only", 'base = "solution"\nkind = "wrong"\nmust_fail = ["doubles"]\n',
                "@jax.jit\ndef double(x):\n    return 3 * x\n")
    labels = {c.label: c for c in verify.cases_for(ex, course, seeds=2)[0]}
    assert "public:triples" not in labels and "public:hidden_only" in labels  # no second grading for it
    own, other = (c for label, c in labels.items() if label.startswith("fixture:triples"))
    assert own.public_fails_too and own.seed == verify.verify_seeds(1)[0] and not other.public_fails_too
    manifest = str(course / "exercises" / "manifest.toml")
    assert verify._run_case(manifest, str(course), own).ok
    # a run whose public checks all pass fails the public expectation (the declared loss is not all)
    passing = verify.Case(1, "fixture:triples", "must_fail", own.snapshot, ("doubles",), only=("doubles",),
                          public_fails_too=True)
    outcome = verify._run_case(manifest, str(course), passing)
    assert not outcome.ok and "passes every public check" in outcome.problem


def test_uncaught_fixture_is_a_verify_failure(course):
    ex = load(course / "exercises" / "manifest.toml").get(1)
    add_fixture(course, "actually_right", 'base = "solution"\nkind = "wrong"\nmust_fail = ["doubles"]\n', "\n")
    case = next(c for c in verify.cases_for(ex, course)[0] if c.label == "fixture:actually_right")
    outcome = verify._run_case(str(course / "exercises" / "manifest.toml"), str(course), case)
    assert not outcome.ok and "not caught by ['doubles']" in outcome.problem


def test_a_grader_error_on_a_must_fail_check_is_not_a_catch(course):
    """A check that crashes (e.g. an UnboundLocalError in a judge) on a wrong submission has
    given no verdict: verify must say so, not count the crash as the mistake caught."""
    ex = load(course / "exercises" / "manifest.toml").get(1)
    hidden = course / "solutions" / "01_double" / "test_hidden.py"
    hidden.write_text(hidden.read_text().replace(
        "    expect_close(expect_array(submission.call(\"double\", x), shape=x.shape), 2 * x)",
        "    got = submission.call(\"double\", x)\n"
        "    if not np.allclose(got, 2 * x):\n"
        "        raise ZeroDivisionError('a judge that crashes on wrong answers')"))
    add_fixture(course, "triples", 'base = "solution"\nkind = "wrong"\nmust_fail = ["doubles"]\n',
                "@jax.jit\ndef double(x):\n    return 3 * x\n")
    case = next(c for c in verify.cases_for(ex, course)[0] if c.label == "fixture:triples")
    outcome = verify._run_case(str(course / "exercises" / "manifest.toml"), str(course), case)
    assert not outcome.ok and "grader error in ['doubles']" in outcome.problem


def test_static_problems_are_reported(course):
    ex = load(course / "exercises" / "manifest.toml").get(1)
    add_fixture(course, "bad_check", 'kind = "wrong"\nmust_fail = ["no_such_check"]\n', "x = 1\n")
    add_fixture(course, "bad_base", 'base = "teacher"\nkind = "wrong"\nmust_fail = ["doubles"]\n', "x = 1\n")
    _, problems = verify.cases_for(ex, course)
    text = "\n".join(problems)
    assert "no_such_check" in text and "base must be one of" in text
    assert "known-wrong fixtures; at least 3 needed" in text
    assert "no statement" in text  # the mini course has no README for its exercise


def _verdicts(run):
    return [(c.name, c.status, c.score, c.message, c.measured) for c in run.exercises[0].checks]


def test_the_course_cache_is_written_by_every_worker_and_changes_no_verdict(course):
    """One compile cache serves a whole verify run: the second grading reads what the first
    wrote (sandbox users included, as root) and every check says exactly what it said when
    everything was compiled for real -- compile counts too."""
    import os

    from grader import cache, runner
    from grader.sandbox import user
    from grader.submission import from_source

    manifest = load(course / "exercises" / "manifest.toml")
    path = course / "solutions" / "01_double" / "double.py"
    snap = from_source(str(path), "double.py", path.read_bytes())
    with cache.course_cache() as folder:
        if user.isolating():
            st = os.stat(folder)
            assert (st.st_gid, st.st_mode & 0o7777) == (user.NOGROUP, 0o2770)  # not others': no sweep goes in
        runs = [runner.grade(manifest, [1], course_root=course, hidden_root=course / "solutions",
                             snapshots={1: snap}, seed=5, course_cache=folder) for _ in range(2)]
        entries = [e for e in os.scandir(folder) if e.name.endswith("-cache")]
        assert entries and not [e for e in os.scandir(folder) if e.name.endswith(".part")]
        if user.isolating():  # the learner-kind sandboxes wrote there as users of their own
            assert {e.stat().st_uid for e in entries} - {0}
    assert not folder.exists()
    assert runs[0].exercises[0].score == runs[0].exercises[0].max_score
    assert _verdicts(runs[1]) == _verdicts(runs[0])


def test_cheats_get_no_shared_compile_cache(course, monkeypatch):
    from grader import runner

    seen = {}

    def fake_grade(*args, course_cache=None, **kwargs):
        seen["cache"] = course_cache
        raise RuntimeError("stop here")

    monkeypatch.setattr(runner, "grade", fake_grade)
    monkeypatch.setattr(verify, "_COURSE_CACHE", "/nonexistent/cache")  # as a grading pool's process has it
    add_fixture(course, "triples", 'base = "solution"\nkind = "wrong"\nmust_fail = ["doubles"]\n',
                "def double(x):\n    return 3 * x\n")
    add_fixture(course, "exits", 'base = "stub"\nkind = "cheat"\n', "import os\nos._exit(0)\n")
    cases = verify.cases_for(load(course / "exercises" / "manifest.toml").get(1), course)[0]
    manifest = str(course / "exercises" / "manifest.toml")
    assert {"zero", "full", "must_fail"} <= {c.expect for c in cases}
    for case in cases:
        with pytest.raises(RuntimeError):
            verify._run_case(manifest, str(course), case)
        assert (seen["cache"] is None) == (case.expect == "zero"), case.label


def test_a_later_seed_grades_only_what_draws_from_the_seed(course):
    """A check whose test asks for no ``seed``/``rng`` grades the same at every seed: a fixture
    that loses only such checks is graded once, and a solution's later seeds run only the
    checks that drew (what they require runs with them)."""
    public = course / "exercises" / "01_double" / "test_public.py"
    public.write_text(public.read_text().replace("(submission, rng)", "(submission)")
                      .replace("rng.normal(size=3).astype(np.float32)", "np.arange(3, dtype=np.float32) - 1.5"))
    add_fixture(course, "triples_public", 'base = "solution"\nkind = "wrong"\nmust_fail = ["doubles_public"]\n',
                "@jax.jit\ndef double(x):\n    return 3 * x\n")
    add_fixture(course, "triples", 'base = "solution"\nkind = "wrong"\nmust_fail = ["doubles"]\n',
                "@jax.jit\ndef double(x):\n    return 3 * x\n")
    report = verify.verify(load(course / "exercises" / "manifest.toml"), course, numbers=[1], seeds=2, jobs=1)
    assert all(o.ok for o in report.outcomes), [o.problem for o in report.outcomes if not o.ok]
    second = verify.verify_seeds(2)[1]
    assert report.repeats_skipped == [f"exercise 1 fixture:triples_public@seed={second}"]
    graded = {o.case.label: o for o in report.outcomes}
    assert graded["fixture:triples_public"].seeded == ()
    assert set(graded["solution"].seeded) == {"doubles", "compiles_once"}
    assert set(graded[f"solution@seed={second}"].case.only) == {"doubles", "compiles_once"}
    assert graded[f"fixture:triples@seed={second}"].ok  # a check that draws: graded at every seed
