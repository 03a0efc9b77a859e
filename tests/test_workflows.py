"""The workflow templates: valid YAML, the right shape, and every `grade` command they run
uses options the CLI really has (a renamed option would otherwise break courses silently)."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml

from grader import cli

TEMPLATES = Path(cli.__file__).parent / "templates"
WORKFLOWS = ["learner-workflow.yml", "instructor-workflow.yml"]


def load(name):
    return yaml.safe_load((TEMPLATES / name).read_text())


def run_scripts(workflow):
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            if "run" in step:
                yield step


def grade_invocations(script):
    """Each `grade ...` command in a shell script, as argument lists (continuations joined)."""
    joined = script.replace("\\\n", " ")
    for line in joined.splitlines():
        m = re.search(r"(?:^|[;&|(]\s*|\s)grade\s+(.*)", line)
        if m and not line.strip().startswith("#"):
            words = shlex.split(m.group(1).split("||")[0], comments=True)
            yield [w for w in words if w not in (">", "2>&1")]


def resolve(args):
    """The click command ``args`` names, and the arguments after its name."""
    cmd = cli.main
    while isinstance(cmd, click.Group) and args and args[0] in cmd.commands:
        cmd, args = cmd.commands[args[0]], args[1:]
    return cmd, args


@pytest.mark.parametrize("name", WORKFLOWS)
def test_every_grade_command_in_a_workflow_is_real(name):
    seen = 0
    for step in run_scripts(load(name)):
        for args in grade_invocations(step["run"]):
            cmd, rest = resolve(args)
            assert not isinstance(cmd, click.Group), f"{name}: `grade {' '.join(args)}` names no command"
            known = {o for p in cmd.params for o in getattr(p, "opts", [])}
            used = {a.split("=")[0] for a in rest if a.startswith("-")}
            assert used <= known, f"{name}: `grade {args[0]}` has no option {sorted(used - known)}"
            seen += 1
    assert seen, f"{name} runs no grade command"


def test_learner_workflow_runs_on_every_push():
    wf = load("learner-workflow.yml")
    triggers = wf[True] if True in wf else wf["on"]  # YAML 1.1 reads the key `on` as True
    assert {"push", "pull_request"} <= set(triggers)


def test_instructor_workflow_grades_a_matrix_of_forks_then_merges():
    wf = load("instructor-workflow.yml")
    jobs = wf["jobs"]
    assert jobs["grade"]["needs"] == "roster" and jobs["gradebook"]["needs"] == "grade"
    assert "fromJSON(needs.roster.outputs.forks)" in jobs["grade"]["strategy"]["matrix"]["fork"]
    scripts = "\n".join(s["run"] for s in run_scripts(wf))
    assert "grade ci --submission submission --hidden course/solutions" in scripts
    assert "grade gradebook import" in scripts
    # The fork is checked out beside the course and never installed: the grader comes from the course.
    steps = jobs["grade"]["steps"]
    assert any(s.get("with", {}).get("repository") == "${{ matrix.fork.repo }}" for s in steps)
    assert any("pip install ./course" in s.get("run", "") for s in steps)


def test_instructor_roster_step_builds_the_matrix(tmp_path):
    wf = load("instructor-workflow.yml")
    script = next(s["run"] for s in wf["jobs"]["roster"]["steps"] if "run" in s)
    (tmp_path / "roster.txt").write_text("# the class\nada/jax-ex\n\nbob/jax-ex@final  # late\n")
    out = tmp_path / "out"
    subprocess.run([sys.executable, "-c", script], cwd=tmp_path, check=True,
                   env={**os.environ, "GITHUB_OUTPUT": str(out)})
    key, _, value = out.read_text().strip().partition("=")
    assert key == "forks"
    assert json.loads(value) == [{"repo": "ada/jax-ex", "ref": "", "id": "ada__jax-ex"},
                                 {"repo": "bob/jax-ex", "ref": "final", "id": "bob__jax-ex"}]
