"""The `grade` entry point: a zygote started before the CLI loads, taken by the grading."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.entry import single_exercise
from grader.sandbox import client

MINI = Path(__file__).parent / "minicourse"
SOLUTION = MINI / "solutions" / "01_double" / "double.py"


@pytest.mark.parametrize("args, number", [
    (["exercise", "3"], 3),
    (["exercise", "03", "-v"], 3),
    (["exercise", "--seed", "5", "3", "--public-only"], 3),
    (["exercise", "3", "--file", "fixtures/x/bad.py", "--json"], 3),
    (["exercise", "--file", "7"], None),  # 7 is the file, no exercise is named
    (["exercise", "1", "2"], None),  # several: graded in a process pool, nothing started early
    (["exercise", "recompile-counting"], None),  # a name needs the manifest
    (["exercise", "3", "--help"], None),
    (["exercise", "\u0663"], None),  # an Arabic-Indic digit is not an exercise number
    (["all"], None),
    ([], None),
])
def test_only_one_exercise_named_by_number_starts_a_zygote_early(args, number):
    assert single_exercise(args) == number


def test_a_spare_zygote_is_taken_only_by_a_grading_it_serves():
    client.start_spare_zygote("ex03_")
    spare = client._spare
    assert spare is not None and spare.alive
    assert client.take_spare_zygote("ex01_") is None  # other probes: closed, not kept
    assert spare.proc is None and client._spare is None
    client.start_spare_zygote("ex03_")
    taken = client.take_spare_zygote("ex03_")
    try:
        assert taken is not None and taken.alive and client._spare is None
        assert client.take_spare_zygote("ex03_") is None  # taken once
    finally:
        taken.close()


def _grade(tmp_path, *args, **env):
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    full_env = {**os.environ, "GRADER_COURSE": str(MINI), "GRADER_NO_CACHE": "1", "TMPDIR": str(tmp), **env}
    proc = subprocess.run([sys.executable, "-m", "grader", *args], env=full_env, capture_output=True, text=True,
                          timeout=300)
    return proc, tmp


def test_the_early_zygote_gives_the_verdict_of_a_grading_without_one(tmp_path):
    args = ("exercise", "1", "--file", str(SOLUTION), "--json", "--seed", "7")
    early, tmp = _grade(tmp_path, *args)
    late, _ = _grade(tmp_path, *args, GRADER_NO_ZYGOTE="1")
    assert early.returncode == late.returncode == 0, early.stderr + late.stderr

    def verdicts(proc):
        return [(c["name"], c["status"], c["score"], c["message"])
                for c in json.loads(proc.stdout)["exercises"][0]["checks"]]

    assert verdicts(early) == verdicts(late) and len(verdicts(early)) >= 3
    assert not list(tmp.glob("grade-zygote-*"))  # closed: its private folder is gone


def test_an_untaken_zygote_is_closed_at_exit(tmp_path):
    proc, tmp = _grade(tmp_path, "exercise", "99")
    assert proc.returncode == 2 and "there is no exercise 99" in proc.stderr
    assert not list(tmp.glob("grade-zygote-*"))


def test_the_options_that_take_a_value_are_the_exercise_commands():
    """The early parse must skip exactly the values `grade exercise` takes, or a value
    (`--seed 5`) would be read as the exercise."""
    from grader.entry import _VALUE_OPTIONS
    from grader.learner.cli import exercise_cmd

    taking_a_value = {name for p in exercise_cmd.params if p.param_type_name == "option" and not p.is_flag
                      for name in p.opts if name.startswith("--")}
    assert taking_a_value == set(_VALUE_OPTIONS)
