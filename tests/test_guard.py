"""The integrity guard's three outcomes, scenario by scenario (``tests/guard_scenarios.py``),
on the grader's Python and, where they are installed, on Python 3.12 and 3.13 (whose
``typing``, ``enum`` and ``collections`` ask for module names without frames).

* allowed: the standard library reading a module name or a line for the learner;
* refused quietly: an ordinary exception that says what to do, a refusal reported with
  the learner's file and line, never a violation;
* accused: a violation with the learner's line, only for actions aimed at the grader.

And the rule for frames cannot be abused: a consumer whose helpers the learner replaced,
a copy of a consumer running with the learner's globals, a learner ``__repr__`` or logging
handler that runs while a consumer holds frames, a ``StackSummary`` subclass -- none gets
a frame; the hook never calls the learner's builtins or string methods.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "guard_scenarios.py"

ALLOWED = ("namedtuple", "typevar_newtype", "typeddict_functional", "enum_functional", "format_exc", "format_stack",
           "capture_locals", "logging_exception", "warnings_stacklevel", "hostname_platform",
           "dev_null_and_own_folder", "own_function_code", "ast_parse_of_a_library_file",
           "repr_during_capture_locals", "handler_sees_no_frame", "patched_builtins", "evil_path_string",
           "fabricated_events", "thread_dies", "absl_defines_a_flag")
#: never accused, whatever a library may be refused on the way (trio's import asks for
#: frames and processes, and is refused them: the learner's ``except`` handles it)
NOT_ACCUSED = ("library_import_makes_code",)
REFUSED = {  # scenario -> the refusal kind (grader.sandbox.outcomes.REFUSALS)
    "currentframe": "frame", "inspect_stack": "frame", "getframe": "frame", "walk_tb": "frame",
    "walk_stack": "frame", "gi_frame": "frame", "getframe_from_c": "frame", "current_frames": "thread_frames",
    "gc_walk": "gc", "settrace": "hook", "subprocess": "process", "socket_connect": "network",
    "read_outside": "read_outside", "write_outside": "write_outside", "grader_import": "read_grader",
    "ctypes": "ctypes", "marshal_load": "marshal",
    "consumer_with_replaced_walk_stack": "frame", "consumer_with_replaced_lazycache": "frame",
    "consumer_copy_with_own_globals": "frame", "stack_summary_subclass": "frame",
    "stack_summary_subclass_c_callable": "frame",
}
ACCUSED = {
    "compile_under_a_library_name": "spoof_compile", "code_claiming_a_library": "spoof_code",
    "function_from_library_code": "spoof_function", "swap_in_library_code": "code_swap",
    "exec_library_function_code": "library_exec", "holding_a_grader_frame": "grader_frame",
}


def _pythons() -> list[str]:
    """This Python, and 3.12 and 3.13 if this machine has them (on PATH, or from pyenv)."""
    found = [sys.executable]
    for version in ("3.12", "3.13"):
        candidates = [shutil.which(f"python{version}"),
                      *sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python{version}"))]
        for exe in filter(None, candidates):
            if subprocess.run([str(exe), "-c", f"import sys; assert sys.version_info[:2] == ({version.replace('.', ', ')})"],
                              capture_output=True).returncode == 0:
                found.append(str(exe))
                break
    return found


def _run(python: str, tmp_path: Path) -> dict:
    box, graders = tmp_path / "box", tmp_path / "g"
    box.mkdir()
    (graders / "fakegrader").mkdir(parents=True)
    (graders / "fakegrader" / "__init__.py").write_text("")
    (graders / "fakegrader" / "leaky.py").write_text("import sys\n\nFRAME = sys._getframe()  # before the guard\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([python, str(SCRIPT), str(box), str(graders)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("python", _pythons(), ids=lambda p: Path(p).name)
def test_each_scenario_reaches_its_outcome(python, tmp_path):
    got = _run(python, tmp_path)
    assert set(got) == set(ALLOWED) | set(REFUSED) | set(ACCUSED) | set(NOT_ACCUSED)
    for name in NOT_ACCUSED:
        assert got[name]["outcome"] == "ok" and not got[name]["accused"], (name, got[name])
    for name in ALLOWED:
        assert got[name]["outcome"] == "ok" and not got[name]["accused"], (name, got[name])
        # a library may be refused something it handles itself (platform asking `uname`)
        expected = {"process", "read_outside"} | ({"gc"} if name == "patched_builtins" else set()) | (
            {"frame"} if name == "fabricated_events" else set())
        assert {r["kind"] for r in got[name]["refused"]} <= expected, (name, got[name])
    seen_refusals = {r["kind"] for v in got.values() for r in v["refused"]}
    for name, kind in REFUSED.items():
        outcome = got[name]["outcome"]
        assert outcome.startswith(("PermissionError: refused by the grader's sandbox", "ImportError")), (name, outcome)
        assert "integrity violation" not in outcome and not got[name]["accused"], (name, got[name])
        assert kind in seen_refusals
    for name, kind in ACCUSED.items():
        accused = got[name]["accused"]
        assert [a["kind"] for a in accused] == [kind], (name, got[name])
        assert accused[0]["file"] == "learner.py" and accused[0]["line"] > 0  # evidence: the learner's line
    # the refusal names the line that asked
    frame = [r for r in got["getframe"]["refused"] if r["kind"] == "frame"]
    assert frame and frame[0]["file"] == "learner.py" and frame[0]["line"] == 1
