"""`grade batch` and the gradebook, run for real on synthetic forks of the mini course.

One module-scoped batch grades 20 forks (solutions, stubs, wrong answers, cheats, a git
repository with uncommitted changes, a bare repository, a named fork); later tests check
that batch's gradebook, re-run it, kill a CLI batch (SIGTERM, then SIGKILL) and resume it,
and compare the result with the uninterrupted batch's.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.course import batch, hidden
from grader.course.cli import batch_cmd, gradebook_group
from grader.course.gradebook import SCHEMA_VERSION, Gradebook, GradebookError, utc_iso
from grader.manifest import load
from grader.results import RunResult
from grader.submission import read_submission

MINI = Path(__file__).parent / "minicourse"
SOL1 = (MINI / "solutions" / "01_double" / "double.py").read_text()
SOL2 = (MINI / "solutions" / "02_triple" / "triple.py").read_text()
STUB1 = (MINI / "exercises" / "01_double" / "double.py").read_text()
STUB2 = (MINI / "exercises" / "02_triple" / "triple.py").read_text()
GIT = ["git", "-c", "user.name=Fork Author", "-c", "user.email=fork@example.com", "-c", "init.defaultBranch=main"]

#: fork name -> (double.py or None for missing, triple.py or None, expected (ex 1 score, ex 2 score))
FORKS = {
    # (exercise 1's file is the same in each: the mini course's compiles_once check fails for seeds whose
    # `doubles` draw already compiled its shape -- a known flaw of tests/minicourse, not of the batch)
    **{f"solution-{i}": (SOL1, SOL2 + f"\n# variant {i}\n", (4, 2)) for i in range(4)},
    **{f"stub-{i}": (STUB1 + f"\n# {i}\n", STUB2 + f"\n# {i}\n", (0, 0)) for i in range(2)},
    "half-done": (SOL1, STUB2, (4, 0)),
    "wrong-factor": (SOL1.replace("2 * x", "3 * x"), SOL2.replace("3 * x", "2 * x"), (0, 0)),
    "wrong-shape": (SOL1.replace("2 * x", "(2 * x)[:1]"), SOL2.replace("3 * x", "3 * x + 1"), (0, 0)),
    "wrong-recompiles": ("import jax\n\ndef double(x):\n    return jax.jit(lambda y: 2 * y)(x)\n", SOL2, (3, 2)),
    "syntax-error": ("def double(x)\n    return 2 * x\n", SOL2, (0, 2)),
    "missing-files": (None, None, (0, 0)),
    "cheat-exit-on-import": ("import os\nos._exit(0)\n" + SOL1, "import os\nos._exit(0)\n" + SOL2, (0, 0)),
    "cheat-sys-exit-in-call": ("def double(x):\n    raise SystemExit(0)\n",
                               "def triple(x):\n    import sys\n    sys.exit(0)\n", (0, 0)),
    "cheat-fake-equality": ("class E:\n    def __eq__(self, o):\n        return True\n\n"
                            "def double(x):\n    return E()\n", "def triple(x):\n    return {'ok': True}\n", (0, 0)),
    "cheat-prints-results": ("print('12 passed in 0.50s')\n" + STUB1, "print('score 2/2')\n" + STUB2, (0, 0)),
    "cheat-conftest": (STUB1, STUB2, (0, 0)),  # + a conftest.py that forces passes, below
}
GIT_FORKS = {"git-fork": (4, 2), "bare-fork": (4, 2)}  # a committed solution (the work tree holds a stub)
NAMED = ("alice", "solution-0", (4, 2))  # alice=<folder of solution-0>: the same files, another identity
CHECKS = {1: ["doubles_public", "doubles", "compiles_once"], 2: ["triples"]}


def write_fork(folder: Path, double: str | None, triple: str | None) -> None:
    for sub, name, text in (("01_double", "double.py", double), ("02_triple", "triple.py", triple)):
        (folder / "exercises" / sub).mkdir(parents=True, exist_ok=True)
        if text is not None:
            (folder / "exercises" / sub / name).write_text(text)


def make_forks(root: Path) -> list[str]:
    """The forks, as SUBMISSION arguments."""
    args = []
    for name, (double, triple, _) in FORKS.items():
        write_fork(root / name, double, triple)
        args.append(str(root / name))
    (root / "cheat-conftest" / "exercises" / "01_double" / "conftest.py").write_text(
        "import pytest\n\n@pytest.hookimpl(tryfirst=True)\ndef pytest_runtest_call(item):\n    return True\n")
    repo = root / "git-fork"
    write_fork(repo, SOL1, SOL2)
    subprocess.run([*GIT, "init", "-q", str(repo)], check=True)
    subprocess.run([*GIT, "-C", str(repo), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(repo), "commit", "-q", "-m", "solutions"], check=True)
    write_fork(repo, STUB1, STUB2)  # uncommitted: must not count
    subprocess.run([*GIT, "clone", "-q", "--bare", str(repo), str(root / "bare-fork.git")], check=True)
    args += [str(repo), str(root / "bare-fork.git"), f"{NAMED[0]}={root / NAMED[1]}"]
    return args


def expected_scores() -> dict[str, tuple[int, int]]:
    out = {name: exp for name, (_, _, exp) in FORKS.items()}
    out.update(GIT_FORKS)
    out[NAMED[0]] = NAMED[2]
    return out


def latest_scores(path: Path) -> dict[str, tuple[int, ...]]:
    with Gradebook(path) as book:
        rows = book.gradings()
    scores: dict[str, dict[int, int]] = {}
    for g in rows:
        scores.setdefault(g["submission"], {})[g["exercise"]] = g["score"]
    return {name: tuple(by[n] for n in sorted(by)) for name, by in scores.items()}


def snapshot(path: Path) -> list:
    """The gradebook's content, less what differs between two runs of the same batch: row
    ids, record ids, times, durations and the workers' timings; the gradebook's own folder
    (clones live there)."""
    db = sqlite3.connect(path)
    prefix = str(path.parent)
    out = []
    for row in db.execute("SELECT id, unit_key, submission, submission_key, source, git_commit, content_hash,"
                          " exercise, slug, title, seed, score, max_score, hidden_run, error, grader_version,"
                          " jax_version, hidden_digest, checks_digest, origin, result_json FROM gradings"):
        result = json.loads(row[-1])
        result.pop("duration_s")
        result.pop("timings", None)
        for c in result["checks"]:
            c.pop("duration_s")
        checks = db.execute("SELECT position, name, visibility, status, score, max_score, message, private"
                            " FROM checks WHERE grading_id = ? ORDER BY position", (row[0],)).fetchall()
        out.append((row[1:-1], json.dumps(result, sort_keys=True).replace(prefix, "<gradebook folder>"), checks))
    db.close()
    return sorted(out)


def count_gradings(path: Path) -> int:
    if not path.exists():
        return 0
    db = sqlite3.connect(path, timeout=10)
    try:
        return db.execute("SELECT count(*) FROM gradings").fetchone()[0]
    except sqlite3.OperationalError:  # the schema is not there yet
        return 0
    finally:
        db.close()


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    import shutil

    dst = tmp_path_factory.mktemp("course") / "course"
    shutil.copytree(MINI, dst)
    return dst


@pytest.fixture(scope="module")
def forks(tmp_path_factory) -> list[str]:
    return make_forks(tmp_path_factory.mktemp("forks"))


def run(course: Path, args: list[str], gradebook: Path, **kw) -> batch.BatchReport:
    manifest = load(course / "exercises" / "manifest.toml")
    hidden_root = course / "solutions"
    return batch.run_batch(manifest, batch.locate_all(args), course_root=course, hidden_root=hidden_root,
                           gradebook=gradebook, hidden_digest=hidden.digest(hidden_root), **kw)


@pytest.fixture(scope="module")
def reference(course, forks, tmp_path_factory) -> Path:
    """The uninterrupted batch over every fork."""
    path = tmp_path_factory.mktemp("reference") / "grades.sqlite"
    report = run(course, forks, path, jobs=2)
    assert not report.interrupted and not report.fetch_errors and not report.grader_errors
    assert len(report.graded) == len(forks) * 2 and not report.skipped
    return path


# --- the big batch -----------------------------------------------------------------------------

def test_batch_fills_the_gradebook(reference, forks, course):
    assert len(forks) >= 20
    assert latest_scores(reference) == expected_scores()
    with Gradebook(reference) as book:
        gradings = book.gradings(history=True, private=True)
        rows = book.check_rows()
        assert book.count() == len(forks) * 2  # one row per (submission, exercise)
    assert len(rows) == len(forks) * 4  # one row per submission, exercise and check
    assert {(r["submission"], r["exercise"], r["check"]) for r in rows} == {
        (s, n, c) for s in expected_scores() for n, names in CHECKS.items() for c in names}
    manifest = load(course / "exercises" / "manifest.toml")
    by = {(g["submission"], g["exercise"]): g for g in gradings}
    for g in gradings:
        assert g["grader_version"] and g["jax_version"] and g["origin"] == "batch" and not g["error"]
        assert g["hidden_digest"] == hidden.digest(course / "solutions")
        assert g["graded_at"] == utc_iso(g["graded_at"]) and g["graded_at"].endswith("+00:00")
        assert g["result"]["score"] == g["score"] and g["result"]["number"] == g["exercise"]
    # The seed is the one `grade` derives from the files that were graded.
    sol = by[("solution-1", 1)]
    ex1 = manifest.get(1)
    assert sol["seed"] == read_submission(Path(forks[1]), ex1.dir, ex1.files).seed(1)
    # The git fork is graded at its commit, not its (stub) work tree; the commit is recorded.
    head = subprocess.run(["git", "-C", forks[len(FORKS)], "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert by[("git-fork", 1)]["commit"] == by[("bare-fork", 2)]["commit"] == head
    assert by[("solution-0", 1)]["commit"] == ""
    assert by[("alice", 1)]["submission_key"] == "name:alice" and by[("alice", 1)]["seed"] == by[("solution-0", 1)]["seed"]
    # Learner-facing messages and instructor-only text are kept apart.
    crash = {c["name"]: c for c in by[("cheat-exit-on-import", 1)]["result"]["checks"]}
    assert "exited with status 0" in crash["doubles_public"]["message"]
    wrong = {c["name"]: c for c in by[("wrong-factor", 1)]["result"]["checks"]}
    assert wrong["doubles"]["message"] == "some random array was not doubled exactly"
    assert "largest difference" in wrong["doubles"]["private"]
    public_rows = [r for r in rows if r["submission"] == "wrong-factor"]
    assert "private" not in public_rows[0] and all("largest difference" not in r["message"] for r in public_rows)


def test_a_second_batch_grades_nothing_and_regrade_keeps_history(reference, forks, course, tmp_path):
    before = snapshot(reference)
    report = run(course, forks, reference, jobs=2)
    assert report.graded == [] and len(report.skipped) == len(forks) * 2
    assert snapshot(reference) == before
    # --regrade grades again and adds rows; the old ones stay (history), exports show the latest.
    path = tmp_path / "grades.sqlite"
    args = [forks[0], forks[5]]
    run(course, args, path, numbers=[2], jobs=2)
    report = run(course, args, path, numbers=[2], jobs=2, regrade=True)
    assert len(report.graded) == 2
    with Gradebook(path) as book:
        assert book.count() == 4
        latest, history = book.gradings(), book.gradings(history=True)
    assert len(latest) == 2 and len(history) == 4
    for g in latest:  # the latest is the regrade (history is ordered by time, then by insertion)
        assert g == [h for h in history if h["submission"] == g["submission"]][-1]


def test_a_new_commit_is_fetched_and_regraded_where_it_changed_only(course, tmp_path):
    repo = tmp_path / "fork"
    write_fork(repo, SOL1, STUB2)
    subprocess.run([*GIT, "init", "-q", str(repo)], check=True)
    subprocess.run([*GIT, "-C", str(repo), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(repo), "commit", "-q", "-m", "exercise 1"], check=True)
    path = tmp_path / "book" / "grades.sqlite"
    path.parent.mkdir()
    first = run(course, [str(repo)], path, jobs=2)
    assert len(first.graded) == 2 and (path.parent / "grades.repos").is_dir()
    write_fork(repo, SOL1, SOL2)
    subprocess.run([*GIT, "-C", str(repo), "commit", "-q", "-am", "exercise 2"], check=True)
    second = run(course, [str(repo)], path, jobs=2)
    assert [(u.exercise.number, r.score) for u, r in second.graded] == [(2, 2)] and len(second.skipped) == 1
    assert second.submissions[0].commit != first.submissions[0].commit
    with Gradebook(path) as book:
        commits = {g["exercise"]: g["commit"] for g in book.gradings()}
    assert commits == {1: first.submissions[0].commit, 2: second.submissions[0].commit}
    assert latest_scores(path) == {"fork": (4, 2)}


def test_content_hash_covers_what_grading_can_see(course, tmp_path):
    ex = load(course / "exercises" / "manifest.toml").get(1)
    write_fork(tmp_path, SOL1, None)
    before = batch.content_hash(ex, tmp_path)
    cache = tmp_path / "exercises" / "01_double" / "__pycache__"
    cache.mkdir()
    (cache / "double.cpython-311.pyc").write_bytes(b"\0")  # bytecode is not the learner's work
    assert batch.content_hash(ex, tmp_path) == before
    (tmp_path / "exercises" / "01_double" / "helper.py").write_text("X = 1\n")  # a module it may import
    with_helper = batch.content_hash(ex, tmp_path)
    assert with_helper != before
    (tmp_path / "exercises" / "01_double" / "double.py").write_text(SOL1 + "# edited\n")
    assert batch.content_hash(ex, tmp_path) not in (before, with_helper)
    assert batch.content_hash(ex, tmp_path / "nowhere") != before  # missing files hash too
    (tmp_path / "exercises" / "01_double" / "linked.py").symlink_to("/etc/hostname")  # never read, nor hashed
    assert batch.content_hash(ex, tmp_path) not in (before, with_helper) and \
        "linked.py" not in read_submission(tmp_path, ex.dir, ex.files).files


# --- interruption -----------------------------------------------------------------------------

BATCH_ENTRY = ("import sys; from grader import cli; from grader.course.cli import batch_cmd, gradebook_group; "
               "cli.main.add_command(batch_cmd); cli.main.add_command(gradebook_group); sys.exit(cli.main())")


def start_batch(course: Path, gradebook: Path, args: list[str], *extra: str) -> subprocess.Popen:
    env = dict(os.environ, GRADER_COURSE=str(course))
    return subprocess.Popen([sys.executable, "-c", BATCH_ENTRY, "batch", *args, "--gradebook", str(gradebook),
                             "-j", "2", *extra], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def wait_for_gradings(path: Path, at_least: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while count_gradings(path) < at_least:
        assert proc.poll() is None, f"the batch ended early: {proc.communicate()}"
        assert time.monotonic() < deadline, "the batch made no progress"
        time.sleep(0.05)


def test_killed_batch_resumes_to_the_same_gradebook(reference, forks, course, tmp_path):
    path = tmp_path / "grades.sqlite"
    total = len(forks) * 2
    # SIGTERM: a clean stop that keeps what is finished.
    proc = start_batch(course, path, forks)
    wait_for_gradings(path, 4, proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "interrupted" in err and "run the same command again" in err
    stopped_at = count_gradings(path)
    assert 4 <= stopped_at < total
    # SIGKILL of the batch and its workers, mid-way: no clean-up at all.
    proc = start_batch(course, path, forks)
    wait_for_gradings(path, stopped_at + 6, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    killed_at = count_gradings(path)
    assert stopped_at + 6 <= killed_at < total
    # Started again, it grades exactly the rest.
    proc = start_batch(course, path, forks, "--json")
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    summary = json.loads(out)
    assert summary["graded"] == total - killed_at and summary["skipped"] == killed_at
    assert {s["submission"]: s["score"] for s in summary["submissions"]} == {
        name: sum(exp) for name, exp in expected_scores().items()}
    assert count_gradings(path) == total  # nothing graded twice
    assert snapshot(path) == snapshot(reference)


def test_a_dead_grading_process_is_a_recorded_grader_error_and_retry_errors_regrades(course, tmp_path):
    import shutil

    hidden_root = tmp_path / "hidden"
    shutil.copytree(course / "solutions", hidden_root)
    marker = tmp_path / "break-the-grader"
    marker.touch()
    check = hidden_root / "02_triple" / "test_hidden.py"
    check.write_text(check.read_text().replace(
        "def test_triples(submission, rng):\n",
        f"def test_triples(submission, rng):\n    import os, signal, pathlib\n"
        f"    if pathlib.Path({str(marker)!r}).exists():\n        os.kill(os.getpid(), signal.SIGKILL)\n"))
    forks = []
    for i in range(2):
        write_fork(tmp_path / f"f{i}", SOL1, SOL2 + f"# {i}\n")
        forks.append(str(tmp_path / f"f{i}"))
    manifest = load(course / "exercises" / "manifest.toml")
    path = tmp_path / "grades.sqlite"

    def go(**kw):
        return batch.run_batch(manifest, batch.locate_all(forks), course_root=course, hidden_root=hidden_root,
                               gradebook=path, numbers=[2], jobs=1, **kw)

    report = go()
    assert len(report.grader_errors) == 2  # the second unit got a fresh worker
    for _, result in report.grader_errors:
        assert result.error.startswith("grader error") and "killed by signal SIGKILL" in result.private
    assert go().graded == []  # an error is a result: not graded again by default...
    marker.unlink()
    report = go(retry_errors=True)  # ...unless asked
    assert [r.score for _, r in report.graded] == [2, 2] and not report.grader_errors
    assert go(retry_errors=True).graded == []
    with Gradebook(path) as book:
        assert book.count() == 4 and len(book.gradings()) == 2


def test_one_batch_at_a_time_per_gradebook(course, tmp_path):
    path = tmp_path / "grades.sqlite"
    with open(tmp_path / "grades.sqlite.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(GradebookError, match="another `grade batch` is writing"):
            run(course, [str(tmp_path)], path)


# --- import, export, CLI ----------------------------------------------------------------------

def test_import_is_idempotent_and_export_formats(reference, course, tmp_path):
    with Gradebook(reference) as book:
        g = [g for g in book.gradings(private=True) if g["submission"] == "wrong-factor"]
    from grader.results import ExerciseResult

    run_result = RunResult(exercises=tuple(ExerciseResult.from_dict(x["result"]) for x in g), grader_version="0.1.0",
                           jax_version="0.10.2", seed_option=None, started_at="2030-01-02T03:04:05+01:00",
                           submission="https://example.com/bob/fork.git@" + "ab" * 20)
    results = tmp_path / "results.json"
    results.write_text(json.dumps(run_result.to_dict(private=True)))
    path = tmp_path / "ci.sqlite"
    cli = CliRunner(env={"GRADER_COURSE": str(course)})  # results are checked against their course's manifest
    out = cli.invoke(gradebook_group, ["import", str(results), "--gradebook", str(path)])
    assert out.exit_code == 0 and "imported 2 gradings" in out.output
    out = cli.invoke(gradebook_group, ["import", str(results), str(results), "--gradebook", str(path)])
    assert out.exit_code == 0 and "imported 0 gradings" in out.output and "4 already there" in out.output
    out = cli.invoke(gradebook_group, ["export", "--json", "--private", "--gradebook", str(path)])
    doc = json.loads(out.output)
    assert [(x["submission"], x["commit"], x["graded_at"], x["origin"]) for x in doc["gradings"]] == [
        ("https://example.com/bob/fork.git", "ab" * 20, "2030-01-02T02:04:05+00:00", "import:results.json")] * 2
    assert [x["result"] for x in doc["gradings"]] == [x["result"] for x in g]  # nothing lost on the way
    # CSV: one row per check, private text only on request; to a file with --out.
    csv_out = tmp_path / "grades.csv"
    assert cli.invoke(gradebook_group, ["export", "--csv", "--out", str(csv_out), "--gradebook", str(path)]).exit_code == 0
    lines = csv_out.read_text().splitlines()
    assert lines[0].startswith("submission,submission_key,commit,exercise,slug,check,") and len(lines) == 1 + 4
    assert "private" not in lines[0] and "largest difference" not in csv_out.read_text()
    private = cli.invoke(gradebook_group, ["export", "--csv", "--private", "--gradebook", str(path)]).output
    assert private.splitlines()[0].endswith(",private") and "largest difference" in private


def test_every_grading_the_batch_made_is_a_result_import_takes(reference, course, tmp_path):
    """The import's checks against the manifest refuse nothing the grader writes: every
    grading of the batch (solutions, stubs, wrong answers, cheats, syntax errors, missing
    files), as a result file for the instructor or for the learner, is taken."""
    from grader.results import ExerciseResult

    with Gradebook(reference) as book:
        gradings = book.gradings(history=True, private=True)
    cli = CliRunner(env={"GRADER_COURSE": str(course)})
    for private in (True, False):
        runs = [RunResult(exercises=(ExerciseResult.from_dict(g["result"]),), grader_version=g["grader_version"],
                          jax_version=g["jax_version"], seed_option=None, started_at=g["graded_at"],
                          submission=g["submission"]).to_dict(private=private) for g in gradings]
        results = tmp_path / f"all-{private}.json"
        results.write_text(json.dumps(runs))
        path = tmp_path / f"again-{private}.sqlite"
        out = cli.invoke(gradebook_group, ["import", str(results), "--gradebook", str(path)])
        assert out.exit_code == 0, out.output
        with Gradebook(path) as book:
            assert book.count() == len(gradings) >= 40


def test_export_latest_by_default_and_all_history(reference, tmp_path):
    cli = CliRunner()
    latest = cli.invoke(gradebook_group, ["export", "--gradebook", str(reference)]).output
    rows = list(csv.DictReader(io.StringIO(latest)))
    assert len(rows) == len(expected_scores()) * 4 and {r["hidden_run"] for r in rows} == {"true"}
    assert "syntax error" in next(r["message"] for r in rows if r["submission"] == "syntax-error")
    assert cli.invoke(gradebook_group, ["export", "--gradebook", str(reference)]).output == latest  # deterministic
    history = cli.invoke(gradebook_group, ["export", "--json", "--all", "--gradebook", str(reference)]).output
    assert json.loads(history)["history"] is True


def test_import_and_export_errors_are_clear(tmp_path):
    cli = CliRunner()
    out = cli.invoke(gradebook_group, ["export", "--gradebook", str(tmp_path / "none.sqlite")])
    assert out.exit_code == 2 and "there is no gradebook" in out.output
    bad = tmp_path / "bad.json"
    bad.write_text('{"format_version": 1}')
    out = cli.invoke(gradebook_group, ["import", str(bad), "--gradebook", str(tmp_path / "g.sqlite")])
    assert out.exit_code == 2 and "not a grader result of format_version 4" in out.output
    bad.write_text("not json")
    out = cli.invoke(gradebook_group, ["import", str(bad), "--gradebook", str(tmp_path / "g.sqlite")])
    assert out.exit_code == 2 and "is not JSON" in out.output
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    out = cli.invoke(gradebook_group, ["export", "--gradebook", str(other)])
    assert out.exit_code == 3 and "not a gradebook" in out.output
    newer = tmp_path / "newer.sqlite"
    Gradebook(newer).close()
    db = sqlite3.connect(newer)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    out = cli.invoke(gradebook_group, ["export", "--gradebook", str(newer)])
    assert out.exit_code == 3 and "newer grader" in out.output


@pytest.fixture
def cli_course(course, monkeypatch):
    monkeypatch.setenv("GRADER_COURSE", str(course))
    return course


def test_course_cli_usage_and_grading_errors(cli_course, tmp_path):
    cli = CliRunner()
    gb = ["--gradebook", str(tmp_path / "g.sqlite")]
    out = cli.invoke(batch_cmd, [str(tmp_path / "nowhere"), *gb])
    assert out.exit_code == 2 and "no such folder, and not a git URL" in out.output
    out = cli.invoke(batch_cmd, [str(tmp_path), "--exercise", "9", *gb])
    assert out.exit_code == 2 and "there is no exercise 9" in out.output
    out = cli.invoke(batch_cmd, [str(tmp_path), "--hidden", str(tmp_path / "nope.tgz"), *gb])
    assert out.exit_code == 3 and "does not exist" in out.output
    (tmp_path / "not-a-db.sqlite").write_text("hello")
    out = cli.invoke(batch_cmd, [str(tmp_path), "--gradebook", str(tmp_path / "not-a-db.sqlite")])
    assert out.exit_code == 3 and "cannot use" in out.output and "not a database" in out.output
    out = cli.invoke(batch_cmd, [str(tmp_path / "repo.git"), *gb])  # neither there nor a URL
    assert out.exit_code == 2
    out = cli.invoke(batch_cmd, [str(tmp_path), "--gradebook", str(tmp_path / "no" / "g.sqlite")])
    assert out.exit_code == 2 and "does not exist" in out.output
    assert not (tmp_path / "g.sqlite").exists()  # nothing was started


def test_course_cli_json_with_a_hidden_tarball_and_an_unreachable_repository(cli_course, tmp_path):
    tarball = tmp_path / "hidden.tgz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(cli_course / "solutions", arcname="course-hidden/solutions")
    fork = tmp_path / "fork"
    write_fork(fork, SOL1, SOL2)
    missing_repo = f"file://{tmp_path}/no-such-repo.git"
    out = CliRunner().invoke(batch_cmd, [str(fork), missing_repo, "--hidden", str(tarball), "--exercise", "2",
                                         "-j", "1", "--json", "--gradebook", str(tmp_path / "g.sqlite")])
    assert out.exit_code == 3  # one submission could not be fetched; the other is graded and recorded
    summary = json.loads(out.stdout)
    assert summary["graded"] == 1 and summary["submissions"][0]["exercises"] == [
        {"exercise": 2, "score": 2, "max_score": 2, "error": "", "graded_at": summary["submissions"][0]["exercises"][0]["graded_at"]}]
    assert [e["submission"] for e in summary["fetch_errors"]] == ["no-such-repo"]
    assert "could not fetch no-such-repo" in out.stderr and "not a git repository" in out.stderr
    with Gradebook(tmp_path / "g.sqlite") as book:
        assert [g["hidden_digest"] for g in book.gradings()] == [hidden.digest(cli_course / "solutions")]


def test_locate_understands_folders_repositories_urls_and_names(tmp_path):
    spec = batch.locate(str(tmp_path))
    assert (spec.label, spec.key, spec.git) == (tmp_path.name, str(tmp_path.resolve()), False)
    assert batch.locate(f"bob={tmp_path}") == batch.Spec("bob", "name:bob", str(tmp_path.resolve()), False)
    url = batch.locate("https://github.com/carol/jax-exercises.git")
    assert (url.label, url.key, url.git) == ("jax-exercises", "https://github.com/carol/jax-exercises.git", True)
    assert batch.locate("git@github.com:dave/fork.git").label == "fork"
    secret = batch.locate("https://carol:t0ken@github.com/carol/jax-exercises.git")
    assert secret.key == "https://github.com/carol/jax-exercises.git" and "t0ken" in secret.source  # git needs it
    assert batch.locate("erin=https://example.com/x.git?ref=a=b").key == "name:erin"
    with pytest.raises(batch.SourceError, match="is a file"):
        (tmp_path / "f").write_text("")
        batch.locate(str(tmp_path / "f"))
    assert len(batch.locate_all([str(tmp_path), str(tmp_path) + "/"])) == 1
