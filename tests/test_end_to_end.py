"""End to end, as a course runs it: release -> learner's fork -> learner CI -> `grade ci`.

A release of the real course becomes a git repository, as a learner's fork would be.  The
"learner" commits reference solutions for two exercises, a known-wrong fixture for one,
cheats for two (a conftest.py forcing passes; objects whose == is always true), and leaves
one stub.  Then the learner workflow's command runs in the fork (public checks only, 0
points), and `grade ci` grades the fork with the course's hidden checks into every output
format, whose scores must all agree with what each exercise deserves.
"""

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from grader.course import release, verify
from grader.manifest import load

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def git(repo: Path, *args: str) -> str:
    cmd = ["git", "-C", str(repo), "-c", "user.name=Learner", "-c", "user.email=learner@example.com", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def grade(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The `grade` of the repository at ``cwd`` (a release runs its own copy of the grader)."""
    env = {**os.environ, "PYTHONPATH": str(cwd), "GRADER_COURSE": str(cwd), **(env or {})}
    return subprocess.run([sys.executable, "-m", "grader", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_release_fork_learner_ci_then_authoritative_grading(tmp_path):
    manifest = load(REPO / "exercises" / "manifest.toml")
    ex = {e.number: e for e in manifest.exercises}
    fork = tmp_path / "fork"
    release.build_release(REPO, fork)
    git(fork, "init", "-q")
    git(fork, "add", ".")
    git(fork, "commit", "-qm", "the course's release")

    def learner_file(n: int) -> Path:
        return fork / "exercises" / ex[n].dir / ex[n].module_file

    # The learner's work: what each exercise deserves is known in advance.
    for n in (3, 6):
        shutil.copy(REPO / "solutions" / ex[n].dir / ex[n].module_file, learner_file(n))
    wrong = REPO / "fixtures" / ex[2].dir / "no_mask"
    learner_file(2).write_text(verify.fixture_source(ex[2], REPO, wrong))
    must_fail = set(verify.read_fixture(wrong)["must_fail"])
    for n, trick in ((4, "fake_equality"), (5, "conftest_forces_pass")):
        folder = REPO / "fixtures" / "cheats" / trick
        learner_file(n).write_text(learner_file(n).read_text() + "\n\n" + (folder / "cheat.py").read_text())
        for extra in folder.iterdir():
            if extra.name not in ("cheat.py", "fixture.toml"):
                shutil.copy(extra, learner_file(n).parent / extra.name)
    git(fork, "add", ".")
    git(fork, "commit", "-qm", "my solutions")
    commit = git(fork, "rev-parse", "HEAD")

    # The learner workflow's command, in the fork: public checks only, and it says so.
    workflow = (fork / ".github" / "workflows" / "grade.yml").read_text()
    assert "grade all --github" in workflow
    learner_summary = tmp_path / "learner-summary.md"
    public = grade(fork, "all", "--github", "-j", "2", env={"GITHUB_STEP_SUMMARY": str(learner_summary)})
    assert public.returncode == 1, public.stderr  # some public checks fail: normal while unfinished
    assert "hidden checks not run" in learner_summary.read_text()
    assert f"::error file=exercises/{ex[1].dir}/{ex[1].module_file}" in public.stdout
    public_run = json.loads(grade(fork, "all", "--json", "-j", "2").stdout)
    assert public_run["score"] == 0 and not any(e["hidden_run"] for e in public_run["exercises"])
    assert {e["number"]: all(c["passed"] for c in e["checks"] if c["status"] != "not_run")
            for e in public_run["exercises"]}[3] is True

    # Authoritative grading, where the course controls it: the course's grader and hidden checks.
    out = tmp_path / "results"
    summary = tmp_path / "summary.md"
    result = grade(REPO, "ci", "--submission", str(fork), "--hidden", str(REPO / "solutions"),
                   "--json", str(out / "grader.json"), "--gradescope", str(out / "results.json"),
                   "--junit", str(out / "junit.xml"), "--github", "-j", "2",
                   env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert result.returncode == 0, result.stderr  # completed; low scores do not fail CI

    data = json.loads((out / "grader.json").read_text())
    scores = {e["number"]: (e["score"], e["max_score"]) for e in data["exercises"]}
    full = {n: ex[n].max_score for n in ex}
    assert scores[3] == (full[3], full[3]) and scores[6] == (full[6], full[6])
    assert scores[1] == (0, full[1]) and scores[4] == (0, full[4]) and scores[5] == (0, full[5])
    ex2 = next(e for e in data["exercises"] if e["number"] == 2)
    failed2 = {c["name"] for c in ex2["checks"] if not c["passed"] and c["visibility"] == "hidden"}
    assert must_fail <= failed2 and 0 < ex2["score"] < full[2]
    assert data["submission"].endswith(f"@{commit}")
    total = sum(s for s, _ in scores.values())
    assert total == data["score"] == full[3] + full[6] + ex2["score"]

    gradescope = json.loads((out / "results.json").read_text())
    schema = json.loads((REPO / "tests" / "schemas" / "gradescope-results.schema.json").read_text())
    jsonschema.validate(gradescope, schema)
    assert gradescope["score"] == total
    assert sum(t["score"] for t in gradescope["tests"]) == total
    hidden_tests = [t for t in gradescope["tests"] if t["visibility"] == "after_published"]
    assert hidden_tests and all(t["visibility"] in ("visible", "after_published") for t in gradescope["tests"])

    junit = ET.parse(out / "junit.xml").getroot()
    cases = junit.findall(".//testcase")
    assert len(cases) == sum(len(e.checks) for e in manifest.exercises)
    failing = {(c.get("classname"), c.get("name")) for c in cases if c.find("failure") is not None}
    assert {(ex[2].slug, name) for name in must_fail} <= failing
    assert not any(slug in (ex[3].slug, ex[6].slug) for slug, _ in failing)

    text = summary.read_text()
    assert f"{total}" in text and ex[3].title in text
    annotations = [line for line in result.stdout.splitlines() if line.startswith("::error")]
    assert any(f"file=exercises/{ex[2].dir}/{ex[2].module_file}" in a for a in annotations)
