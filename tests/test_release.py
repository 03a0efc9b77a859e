"""`grade release`: the learners' repository holds the public course and nothing secret.

A release of the real course is built once (module fixture).  The tests prove that it
holds exactly the allowlist, that no reference solution, hidden check or fixture reaches
it (searched here with the test's own AST walk, and with ``grader.course.release``'s scanner),
that the scanner catches planted leaks, and that `grade exercise 3` in the release runs
its own grader on the public checks only and says so.  One grading in all (~1-2 s).
"""

import ast
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.course import release
from grader.manifest import load

REPO = Path(__file__).resolve().parents[1]
MANIFEST = load(REPO / "exercises" / "manifest.toml")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("learners") / "repo"
    report = release.build_release(REPO, out)
    return out, report


def release_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# The test's own normalisation (independent of grader.course.release): a function body as ast.dump
# gives it, the docstring dropped; None when it only passes or raises NotImplementedError.
def bodies(source: str) -> dict[str, str]:
    found = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0].value, "value", None), str):
            body = body[1:]
        dump = "\n".join(ast.dump(s) for s in body)
        if body and "NotImplementedError" not in dump and not all(isinstance(s, ast.Pass) for s in body):
            found[dump] = node.name
    return found


def test_release_holds_exactly_the_allowlist(built):
    out, report = built
    files = release_files(out)
    expected = {"exercises/manifest.toml", "pyproject.toml", ".gitignore", "README.md", "Makefile",
                ".github/workflows/grade.yml", "RELEASE.json"}
    for ex in MANIFEST.exercises:
        expected |= {f"exercises/{ex.dir}/{name}" for name in ("README.md", "test_public.py", *ex.files)}
        expected |= {f".grade/stubs/{ex.dir}/{name}" for name in ex.files}  # what `grade reset` brings back
    grader_code = {p.relative_to(REPO).as_posix() for p in (REPO / "grader").rglob("*.py")
                   if "__pycache__" not in p.parts}
    assert grader_code <= set(files) and "grader/cli.py" in files
    assert set(files) - grader_code - {f for f in files if f.startswith("grader/templates/")} == expected
    assert not [f for f in files if f.split("/")[0] in ("solutions", "fixtures", "tests", ".ci") or "__pycache__" in f]

    manifest = json.loads(files["RELEASE.json"])
    assert manifest["grader_version"] == report.grader_version and manifest["format_version"] == 1
    listed = {f["path"]: f["sha256"] for f in manifest["files"]}
    assert set(listed) == set(files) - {"RELEASE.json"}
    assert all(hashlib.sha256(files[p]).hexdigest() == digest for p, digest in listed.items())


def test_no_solution_hidden_check_or_fixture_reaches_the_release(built):
    out, _ = built
    files = release_files(out)
    texts = {rel: data.decode("utf-8") for rel, data in files.items()}
    squashed = {rel: " ".join(t.split()) for rel, t in texts.items()}
    released_bodies = {}
    for rel, text in texts.items():
        if rel.endswith(".py"):
            released_bodies.update({k: f"{rel}::{name}" for k, name in bodies(text).items()})
    given = {k for ex in MANIFEST.exercises for p in ex.learner_paths(REPO) for k in bodies(p.read_text())}

    secret_files = [p for top in ("solutions", "fixtures", "tests", ".ci") for p in (REPO / top).rglob("*")
                    if p.is_file() and "__pycache__" not in p.parts and p.read_bytes().strip()]
    released_digests = {hashlib.sha256(d).hexdigest(): rel for rel, d in files.items()}
    same = [(p, released_digests[hashlib.sha256(p.read_bytes()).hexdigest()]) for p in secret_files
            if hashlib.sha256(p.read_bytes()).hexdigest() in released_digests]
    assert not same

    for ex in MANIFEST.exercises:
        solution = (REPO / "solutions" / ex.dir / ex.module_file).read_text()
        secret = {k: n for k, n in bodies(solution).items() if k not in given}
        assert secret, f"exercise {ex.number}: the solution has no function the learner must write?"
        leaked = {n: released_bodies[k] for k, n in secret.items() if k in released_bodies}
        assert not leaked, f"solution functions of exercise {ex.number} found in the release: {leaked}"

        hidden = (REPO / "solutions" / ex.dir / "test_hidden.py").read_text()
        assert not [rel for rel, t in texts.items() if hidden.strip() in t]
        tests = {k: n for k, n in bodies(hidden).items() if n.startswith("test_")}
        assert tests and not [n for k, n in tests.items() if k in released_bodies]
        test_fns = [n for n in ast.walk(ast.parse(hidden))
                    if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
        for fn in test_fns:
            lines = hidden.splitlines()[fn.body[0].lineno - 1:fn.end_lineno]
            body = " ".join("\n".join(lines).split())
            assert not [rel for rel, t in squashed.items() if body in t], fn.name

    for fixture in (REPO / "fixtures").rglob("*.py"):
        leaked = [n for k, n in bodies(fixture.read_text()).items() if k not in given and k in released_bodies]
        assert not leaked, f"{fixture}: {leaked}"

    assert release.find_leaks(out, REPO) == []


def _replace_function(source: str, name: str, replacement: str) -> str:
    fn = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)
    lines = source.splitlines()
    start = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
    return "\n".join(lines[:start - 1] + [replacement] + lines[fn.end_lineno:]) + "\n"


def _function_source(source: str, name: str) -> str:
    fn = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)
    start = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
    return "\n".join(source.splitlines()[start - 1:fn.end_lineno])


def test_the_scanner_catches_planted_leaks(built, tmp_path):
    out, _ = built
    planted = tmp_path / "planted"
    shutil.copytree(out, planted)
    solution = (REPO / "solutions" / "03_per_example_grad_norms" / "grad_norms.py").read_text()
    stub = planted / "exercises" / "03_per_example_grad_norms" / "grad_norms.py"
    # 1. the solution's function pasted over the stub's
    stub.write_text(_replace_function(stub.read_text(), "per_example_grad_norms",
                                      _function_source(solution, "per_example_grad_norms")))
    # 2. a solution body under another name, with a docstring, in a grader helper
    loops = (REPO / "solutions" / "05_while_loop_vs_scan" / "loops.py").read_text()
    renamed = _function_source(loops, "scan_version").replace("def scan_version(", "def helper(", 1)
    renamed = renamed.replace("):\n", '):\n    """A harmless helper."""\n', 1)
    with (planted / "grader" / "exercises" / "ex05_loops" / "judges.py").open("a") as f:
        f.write("\n\n" + renamed + "\n")
    # 3. a hidden check file quoted in a statement
    hidden = (REPO / "solutions" / "06_reading_a_jaxpr" / "test_hidden.py").read_text()
    with (planted / "exercises" / "06_reading_a_jaxpr" / "README.md").open("a") as f:
        f.write("\n```python\n" + hidden + "\n```\n")
    # 4. a fixture copied under a harmless name, and 5. a solutions/ folder
    fixture = next((REPO / "fixtures" / "02_retrace_diagnosis").glob("*/retrace.py"))
    shutil.copy(fixture, planted / "grader" / "notes.py")
    (planted / "solutions").mkdir()
    (planted / "solutions" / "README.md").write_text("nothing here\n")

    found = release.find_leaks(planted, REPO)
    leaks = {(leak.path, leak.how) for leak in found}
    assert ("exercises/03_per_example_grad_norms/grad_norms.py::per_example_grad_norms", "function body") in leaks
    assert ("grader/exercises/ex05_loops/judges.py::helper", "function body") in leaks
    assert ("exercises/06_reading_a_jaxpr/README.md", "text") in leaks
    assert "solutions/06_reading_a_jaxpr/test_hidden.py" in {leak.secret for leak in found}  # the whole file
    assert ("grader/notes.py", "identical file") in leaks
    assert ("solutions/README.md", "secret folder") in leaks
    assert release.find_leaks(out, REPO) == []  # the untouched release stays clean


def test_a_body_too_small_to_give_anything_away_is_not_a_secret():
    import ast

    def key(src):
        return release.body_key(ast.parse(src).body[0])

    assert key("def f(self, other):\n    return False\n") is None  # any class may say this
    assert key("def g(self):\n    return self.x\n") is None
    assert key("def h(lr):\n    return optax.adam(lr)\n") is not None  # small but telling
    assert key('def k(x):\n    """doc"""\n    y = x * 2\n    return y\n') == key("def m(x):\n    y = x * 2\n    return y\n")


def test_a_leaking_course_is_refused_and_out_left_alone(tmp_path):
    course = tmp_path / "course"
    for top in ("exercises", "grader", "solutions", "fixtures"):
        shutil.copytree(REPO / top, course / top, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", ".gitignore"):
        shutil.copy(REPO / name, course / name)
    solution = (REPO / "solutions" / "05_while_loop_vs_scan" / "loops.py").read_text()
    with (course / "grader" / "exercises" / "ex05_loops" / "judges.py").open("a") as f:
        f.write("\n\n" + _function_source(solution, "scan_version").replace("@partial", "# @partial") + "\n")
    out = tmp_path / "out"
    with pytest.raises(release.LeakError) as caught:
        release.build_release(course, out)
    assert "grader/exercises/ex05_loops/judges.py::scan_version: function body of solutions/05_while_loop_vs_scan/loops.py" \
        in str(caught.value)
    assert caught.value.exit_code == 1 and not out.exists() and [p.name for p in tmp_path.iterdir()] == ["course"]


def test_out_must_be_empty_unless_forced_and_force_keeps_git(tmp_path, capsys):
    out = tmp_path / "out"
    (out / ".git").mkdir(parents=True)
    (out / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (out / "stale.txt").write_text("from an older release\n")
    assert release.release_command_impl(out, force=False, course=REPO) == release.EXIT_USAGE
    assert "not empty" in capsys.readouterr().err and (out / "stale.txt").exists()
    with pytest.raises(release.ReleaseError, match="holds the course itself"):
        release.build_release(REPO, REPO.parent, force=True)
    with pytest.raises(release.ReleaseError, match="inside the course's solutions/"):
        release.build_release(REPO, REPO / "solutions" / "x", force=True)

    # --force replaces an earlier release only: a folder that is not one (a clone of the course,
    # say) keeps its files unless that is asked for explicitly
    assert release.release_command_impl(out, force=True, course=REPO) == release.EXIT_USAGE
    assert "not an earlier release" in capsys.readouterr().err and (out / "stale.txt").exists()
    assert release.release_command_impl(out, force=True, course=REPO, replace_any=True) == release.EXIT_OK
    assert not (out / "stale.txt").exists() and (out / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert (out / "RELEASE.json").is_file() and "leak scan clean" in capsys.readouterr().out
    (out / "notes.txt").write_text("the learners' repository may hold more\n")
    assert release.release_command_impl(out, force=True, course=REPO) == release.EXIT_OK  # an earlier release now
    assert not (out / "notes.txt").exists()
    assert not [p for p in tmp_path.iterdir() if p.name != "out"]  # no staging folder left behind


def test_learner_copy_grades_public_checks_only_and_says_so(built):
    out, _ = built
    env = {**os.environ, "GRADER_COURSE": str(out), "PYTHONPATH": str(out)}
    proc = subprocess.run([sys.executable, "-c", "import grader, grader.cli; print(grader.cli.__file__)"],
                          cwd=out, env=env, capture_output=True, text=True, check=False)
    assert Path(proc.stdout.strip()) == out / "grader" / "cli.py"  # the release's own grader runs
    proc = subprocess.run([sys.executable, "-m", "grader.cli", "exercise", "3"], cwd=out, env={**env, "COLUMNS": "200"},
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    ex3 = next(e for e in MANIFEST.exercises if e.number == 3)
    public = sum(c.visibility == "public" for c in ex3.checks)
    hidden = sum(c.visibility == "hidden" for c in ex3.checks)
    assert f"0 of {public} public checks passed ({hidden} hidden checks not run here" in proc.stdout
    assert "matches_reference_small" in proc.stdout and "not implemented" in proc.stdout
    assert "Traceback" not in proc.stderr


def _step_script(workflow: str, marker: str) -> str:
    """The `run: |` block of the step whose text holds ``marker``."""
    lines = workflow.splitlines()
    start = next(i for i, line in enumerate(lines) if marker in line)
    run = next(i for i in range(start, len(lines)) if lines[i].strip() == "run: |")
    indent = len(lines[run]) - len(lines[run].lstrip()) + 2
    block = []
    for line in lines[run + 1:]:
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            break
        block.append(line)
    return textwrap.dedent("\n".join(block))


def test_workflow_runs_public_checks_and_writes_a_summary(built, tmp_path):
    out, _ = built
    workflow = (out / ".github" / "workflows" / "grade.yml").read_text()
    assert "\non:\n  push:\n  pull_request:\n" in workflow
    assert 'python-version: "3.11"' in workflow and "pip install -e ." in workflow
    assert "grade all --github" in workflow
    assert "\t" not in workflow

    # The grading step: green for "some checks fail" (1), red for a grader or usage error.
    grade_step = _step_script(workflow, "name: Grade (public checks)")
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "grade").write_text('#!/bin/sh\necho "{}"\nexit "$FAKE_STATUS"\n')
    (fake_bin / "grade").chmod(0o755)
    for status, expected in ((0, 0), (1, 0), (3, 3)):
        env = {**os.environ, "PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}", "FAKE_STATUS": str(status)}
        proc = subprocess.run(["bash", "-eo", "pipefail", "-c", grade_step], cwd=tmp_path, env=env,
                              capture_output=True, text=True, check=False)
        assert proc.returncode == expected, (status, proc.stdout, proc.stderr)
    # What `grade all --github` writes is tested end to end (tests/test_end_to_end.py).


def test_learner_readme_and_makefile(built):
    out, report = built
    readme = (out / "README.md").read_text()
    for ex in MANIFEST.exercises:
        assert f"| {ex.number} | {ex.title} |" in readme and f"exercises/{ex.dir}/{ex.module_file}" in readme
    for command in ("make setup", "pip install -e .", "grade list", "grade exercise 1", "grade hint 1"):
        assert command in readme
    assert "hidden checks" in readme.lower() and report.grader_version in readme and "@@" not in readme
    makefile = (out / "Makefile").read_text()
    for target in ("setup:", "grade:", "hint:", "list:"):
        assert f"\n{target}" in makefile
    assert "\t$(BIN)/grade $(if $(N),exercise $(N),all) || [ $$? -eq 1 ]" in makefile
