"""The learner's loop: progress in `grade list`, `grade reset`, several exercises at once,
clear messages for common slips, public-only totals, `pytest exercises/...`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader import cli

MINI = Path(__file__).parent / "minicourse"
SOL1 = (MINI / "solutions" / "01_double" / "double.py").read_text()
STUB1 = (MINI / "exercises" / "01_double" / "double.py").read_text()


@pytest.fixture
def learner(tmp_path, monkeypatch):
    """A learner's copy of the mini course: no solutions, the stubs kept under .grade/stubs."""
    root = tmp_path / "copy"
    shutil.copytree(MINI / "exercises", root / "exercises")
    for ex_dir, name in (("01_double", "double.py"), ("02_triple", "triple.py")):
        (root / ".grade" / "stubs" / ex_dir).mkdir(parents=True)
        shutil.copy(root / "exercises" / ex_dir / name, root / ".grade" / "stubs" / ex_dir / name)
    monkeypatch.setenv("GRADER_COURSE", str(root))
    monkeypatch.chdir(root)
    return root


def invoke(*args):
    return CliRunner().invoke(cli.main, list(args), catch_exceptions=False)


def states(root):
    return {e["number"]: e["state"] for e in json.loads(invoke("list", "--json").output)["exercises"]}


def test_list_follows_progress_from_not_started_to_passing_and_changed(learner):
    assert states(learner) == {1: "not_started", 2: "not_started"}
    double = learner / "exercises" / "01_double" / "double.py"
    double.write_text("def double(x):\n    return 3 * x\n")
    assert invoke("exercise", "1").exit_code == 1
    assert states(learner)[1] == "failing"
    double.write_text(SOL1)
    assert states(learner)[1] == "changed"
    result = invoke("exercise", "double")  # by slug
    assert result.exit_code == 0
    assert states(learner)[1] == "passing"
    assert "Public checks: 1 of 1 pass" in result.output and "hidden checks carry the points" in result.output
    assert "Total: 0/0" not in result.output


def test_reset_brings_the_stub_back_and_keeps_the_work(learner):
    double = learner / "exercises" / "01_double" / "double.py"
    double.write_text(SOL1 + "# my work\n")
    result = invoke("reset", "1")
    assert result.exit_code == 0 and "kept in" in result.output
    assert double.read_text() == STUB1
    backups = list((learner / ".grade" / "backups" / "01_double").iterdir())
    assert len(backups) == 1 and backups[0].read_text() == SOL1 + "# my work\n"
    assert "already the stub" in invoke("reset", "1").output


def test_several_exercises_quiet_version_and_clear_usage_errors(learner):
    (learner / "exercises" / "01_double" / "double.py").write_text(SOL1)
    result = invoke("exercise", "1", "triple", "-q")
    assert [line.split(":")[0] for line in result.output.splitlines()] == ["Exercise 1", "Exercise 2"]
    assert "there is no exercise tripel (did you mean triple?)" in invoke("exercise", "tripel").output
    assert invoke("--version").output.startswith("grade ") and "JAX 0.10.2" in invoke("--version").output


def test_missing_function_empty_file_and_folder_say_what_to_do(learner):
    double = learner / "exercises" / "01_double" / "double.py"
    double.write_text("import jax\n\n@jax.jit\ndef doubel(x):\n    return 2 * x\n")
    out = invoke("exercise", "1").output
    assert "`double` is not defined" in out and "did you mean `doubel`" in out
    double.write_text("\n  \n")
    assert "double.py is empty" in invoke("exercise", "1").output
    double.unlink()
    double.mkdir()
    assert "is a folder" in invoke("exercise", "1").output


def test_plain_pytest_runs_the_public_checks_in_the_sandbox(learner):
    (learner / "exercises" / "01_double" / "double.py").write_text("def double(x):\n    return 3 * x\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "exercises/01_double"],
                          cwd=learner, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "does not match the reference" in done.stdout, done.stdout + done.stderr
    (learner / "exercises" / "01_double" / "double.py").write_text(SOL1)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "exercises/01_double",
                           "-k", "doubles"], cwd=learner, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr
