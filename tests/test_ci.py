"""`grade ci` and `grade gradescope-bundle`, run for real on the mini course.

A learner's fork here is a folder laid out like the learners' repository; the hidden
checks come from the course's solutions/ as a folder or a tarball.
"""

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader import cli

MINI = Path(__file__).parent / "minicourse"


@pytest.fixture
def course(tmp_path, monkeypatch):
    dst = tmp_path / "course"
    shutil.copytree(MINI, dst)
    shutil.copy(Path(__file__).resolve().parents[1] / "pyproject.toml", dst / "pyproject.toml")
    monkeypatch.setenv("GRADER_COURSE", str(dst))
    return dst


def fork(course, tmp_path, solved=(1,)):
    """A learner's fork: the stubs, with the reference solution for the exercises in ``solved``."""
    sub = tmp_path / "fork"
    shutil.copytree(course / "exercises", sub / "exercises")
    for n, (d, f) in {1: ("01_double", "double.py"), 2: ("02_triple", "triple.py")}.items():
        if n in solved:
            shutil.copy(course / "solutions" / d / f, sub / "exercises" / d / f)
    return sub


def ci(*args):
    return CliRunner().invoke(cli.main, ["ci", *map(str, args)], catch_exceptions=False)


def test_ci_grades_with_hidden_checks_and_writes_every_format(course, tmp_path):
    sub, out = fork(course, tmp_path), tmp_path / "out"
    result = ci("--submission", sub, "--hidden", course / "solutions", "--json", out / "r.json",
                "--gradescope", out / "gs.json", "--junit", out / "j.xml", "--quiet", "-j", "1")
    assert result.exit_code == 0, result.output  # a low score is not a CI failure
    data = json.loads((out / "r.json").read_text())
    assert [(e["number"], e["score"], e["max_score"]) for e in data["exercises"]] == [(1, 4, 4), (2, 0, 2)]
    assert all(e["hidden_run"] for e in data["exercises"])
    gs = json.loads((out / "gs.json").read_text())
    assert gs["score"] == 4
    assert "<testsuite" in (out / "j.xml").read_text()
    assert "private" not in data["exercises"][1]["checks"][0]  # instructor details only when asked


def test_ci_fail_under_and_instructor_details(course, tmp_path):
    sub = fork(course, tmp_path, solved=())
    result = ci("--submission", sub, "--hidden", course / "solutions", "--fail-under", "50",
                "--json", tmp_path / "r.json", "--instructor", "-q", "-j", "1")
    assert result.exit_code == 1 and "below --fail-under 50" in result.output
    checks = json.loads((tmp_path / "r.json").read_text())["exercises"][0]["checks"]
    assert all("private" in c for c in checks)


def test_ci_reads_hidden_checks_from_a_tarball(course, tmp_path):
    tar = tmp_path / "hidden.tar.gz"
    with tarfile.open(tar, "w:gz") as t:
        t.add(course / "solutions", arcname="course-private/solutions")
    result = ci("--submission", fork(course, tmp_path, solved=(1, 2)), "--hidden", tar,
                "--json", tmp_path / "r.json", "-q", "-j", "1")
    assert result.exit_code == 0
    assert json.loads((tmp_path / "r.json").read_text())["score"] == 6


def test_ci_unusable_hidden_source_still_writes_a_result(course, tmp_path):
    empty = tmp_path / "not-hidden"
    empty.mkdir()
    out = tmp_path / "gs.json"
    result = ci("--submission", fork(course, tmp_path), "--hidden", empty, "--gradescope", out, "-q")
    assert result.exit_code == 3 and "holds no hidden checks" in result.output
    gs = json.loads(out.read_text())
    assert gs["score"] == 0 and "holds no hidden checks" not in json.dumps(gs)  # the course's problem, not shown


def test_ci_grader_crash_is_a_result_with_its_own_exit_code(course, tmp_path):
    (course / "solutions" / "02_triple" / "test_hidden.py").unlink()
    result = ci("--submission", fork(course, tmp_path), "--hidden", course / "solutions",
                "--json", tmp_path / "r.json", "--instructor", "--gradescope", tmp_path / "gs.json", "-q", "-j", "1")
    assert result.exit_code == 4
    ex2 = json.loads((tmp_path / "r.json").read_text())["exercises"][1]
    assert ex2["error"].startswith("grader error") and "FileNotFoundError" in ex2["private"]
    assert "FileNotFoundError" not in (tmp_path / "gs.json").read_text()
    assert json.loads((tmp_path / "r.json").read_text())["exercises"][0]["score"] == 4  # the rest still graded


def test_ci_finds_uploaded_files_without_the_repository_layout(course, tmp_path):
    upload = tmp_path / "upload"
    upload.mkdir()
    shutil.copy(course / "solutions" / "01_double" / "double.py", upload / "double.py")
    result = ci("--submission", upload, "--hidden", course / "solutions", "--json", tmp_path / "r.json",
                "-q", "-j", "1")
    data = json.loads((tmp_path / "r.json").read_text())
    assert result.exit_code == 0 and data["exercises"][0]["score"] == 4
    assert "not found" in data["exercises"][1]["checks"][0]["message"]


def test_ci_labels_a_git_checkout_by_remote_and_commit_without_credentials(course, tmp_path):
    sub = fork(course, tmp_path)
    git = ["git", "-C", str(sub), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "work"], check=True)
    subprocess.run([*git, "remote", "add", "origin", "https://user:s3cret@example.com/learner/fork.git"], check=True)
    ci("--submission", sub, "--hidden", course / "solutions", "--json", tmp_path / "r.json", "-q", "--exercise", "2")
    label = json.loads((tmp_path / "r.json").read_text())["submission"]
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert label == f"https://example.com/learner/fork.git@{commit}"


def test_gradescope_bundle_holds_hidden_checks_and_references_and_its_run_autograder_grades(course, tmp_path):
    zpath = tmp_path / "autograder.zip"
    result = CliRunner().invoke(cli.main, ["gradescope-bundle", str(zpath)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    with zipfile.ZipFile(zpath) as z:
        names = set(z.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
        z.extractall(tmp_path / "autograder" / "source")
    assert {"setup.sh", "run_autograder", "hidden/01_double/test_hidden.py", "grader/course/ci.py"} <= names
    assert modes["run_autograder"] & 0o111 and modes["setup.sh"] & 0o111
    # the reference solutions travel with the hidden checks (compile checks are judged against
    # their costs), never anywhere a learner's copy could get them
    assert {"hidden/01_double/double.py", "hidden/02_triple/triple.py"} <= names
    assert not any(n.endswith(("double.py", "triple.py")) and not n.startswith("hidden/") for n in names)
    again = tmp_path / "again.zip"
    CliRunner().invoke(cli.main, ["gradescope-bundle", str(again)], catch_exceptions=False)
    assert again.read_bytes() == zpath.read_bytes()  # reproducible

    root = tmp_path / "autograder"
    (root / "submission").mkdir()
    shutil.copy(course / "solutions" / "01_double" / "double.py", root / "submission" / "double.py")
    for p in [root, *root.rglob("*")]:  # as Gradescope unpacks it: readable by all
        os.chmod(p, 0o755 if p.is_dir() else (0o755 if os.access(p, os.X_OK) else 0o644))
    script = root / "source" / "run_autograder"
    os.chmod(script, 0o755)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "GRADER_PYTHON": sys.executable}
    env.pop("GRADER_COURSE")
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 4
    hidden = [t for t in results["tests"] if t.get("visibility") == "after_published"]
    assert hidden and all(t.get("visibility") in ("visible", "after_published") for t in results["tests"])


def test_ci_broken_manifest_and_unknown_exercise(course, tmp_path):
    sub = fork(course, tmp_path)
    unknown = ci("--submission", sub, "--hidden", course / "solutions", "--exercise", "9", "-q")
    assert unknown.exit_code == 2 and "there is no exercise 9" in unknown.output
    (course / "exercises" / "manifest.toml").write_text("format_version = 99\n")
    out = tmp_path / "gs.json"
    broken = ci("--submission", sub, "--hidden", course / "solutions", "--gradescope", out, "-q")
    assert broken.exit_code == 3 and "manifest is broken" in broken.output
    gs = json.loads(out.read_text())
    assert gs["score"] == 0 and "could not run" in json.dumps(gs)
