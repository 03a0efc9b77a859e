"""`grade watch` driven through a real terminal (a pty): edit the file to a wrong answer,
then to a right one; each save shows its verdict; a pass moves on; keys work."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pty_terminal import Terminal

MINI = Path(__file__).parent / "minicourse"


def learner_copy(tmp_path) -> Path:
    root = tmp_path / "copy"
    shutil.copytree(MINI / "exercises", root / "exercises")
    return root


def watch(root: Path, *args: str) -> Terminal:
    env = {**os.environ, "GRADER_COURSE": str(root), "TERM": "xterm", "COLUMNS": "110", "LINES": "50"}
    return Terminal([sys.executable, "-m", "grader.cli", "watch", *args], root, env)


def save(path: Path, text: str) -> float:
    path.write_text(text)
    return time.monotonic()


WRONG = "def double(x):\n    return 3 * x\n"
RIGHT = "import jax\n\n\n@jax.jit\ndef double(x):\n    return 2 * x\n"


def save_and_measure(term: Terminal, path: Path, text: str) -> tuple[float, str]:
    """Seconds from a save to its verdict on the screen, and the screen."""
    term.buf = b""
    t0 = save(path, text)
    screen = term.wait_for(r"graded in \d+\.\d+ s[\s\S]*quit")
    return time.monotonic() - t0, screen


def test_watch_regrades_on_every_save_and_moves_on_when_it_passes(tmp_path):
    root = learner_copy(tmp_path)
    term = watch(root, "1")
    try:
        term.wait_for(r"graded in [\s\S]*quit")
        double = root / "exercises" / "01_double" / "double.py"
        _, screen = save_and_measure(term, double, WRONG)
        assert "0 of 1 public checks passed" in screen and "does not match" in screen
        _, screen = save_and_measure(term, double, RIGHT)
        assert "public checks passed" in screen and "Now watching exercise 2" in screen
        term.buf = b""
        term.type(b"h")
        assert "Hint 1/" in term.wait_for(r"Hint 1/\d")
        term.type(b"l")
        listing = term.wait_for(r"Triple it")
        assert re.search(r"1\s+Double it\s+passing", listing)
        term.type(b"q")
        assert term.close() == 0
    finally:
        if term.proc.poll() is None:
            term.proc.kill()


@pytest.mark.parametrize("probe", [0])
def test_watch_gives_the_same_verdict_as_grade_exercise(tmp_path, probe):
    import json

    root = learner_copy(tmp_path)
    double = root / "exercises" / "01_double" / "double.py"
    double.write_text(WRONG)
    env = {**os.environ, "GRADER_COURSE": str(root)}
    once = subprocess.run([sys.executable, "-m", "grader", "exercise", "1", "--json"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    graded = json.loads(once.stdout)["exercises"][0]
    term = watch(root, "1")
    try:
        screen = term.wait_for(r"graded in [\s\S]*quit")
        for check in graded["checks"]:
            status = {"passed": "PASS", "failed": "FAIL", "not_run": "----"}[check["status"]]
            assert re.search(rf"{status}\s+{check['name']}", screen)
        assert f"seed: {graded['seed']}" in screen
        term.type(b"q")
        assert term.close() == 0
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
