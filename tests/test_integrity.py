"""Verdicts a course can trust: each way a fork could earn, read or break what it must not,
tried for real (as root where the attack needs it, as on CI runners and Gradescope).

The numbers in the test names follow the holes found when the grader was attacked:
(1) links to the course's files, (2) the course's checkout and environment, (3) planting
code where a worker starts, (4, 6) the compile cache, (5) a named sandbox account,
(7) forging measurements inside the learner's own process, (8) hidden inputs leaking into
public messages, (9) interrupts, (10) an open sandbox, (11) stalling or crashing the
trusted side, (12) leftovers, (13) names from git objects, (14) a learner repository's git
configuration, (15) disk, (16) result files the gradebook imports, (17) answers that cost
more to read than to make.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from grader import runner
from grader.course import ci
from grader.manifest import load
from grader.sandbox import user as sandbox_user
from grader.sandbox.client import Sandbox, SubmissionError
from grader.submission import from_source, read_commit, read_submission, single_file
from grader.testing import count_compiles

MINI = Path(__file__).parent / "minicourse"
SOL1 = (MINI / "solutions" / "01_double" / "double.py").read_text()
GIT = ["git", "-c", "user.name=Learner", "-c", "user.email=l@example.com", "-c", "init.defaultBranch=main"]
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the attack needs the grader to run as root")


@pytest.fixture
def course(tmp_path):
    dst = tmp_path / "course"
    shutil.copytree(MINI, dst)
    return dst


def grade_source(course, source: str, seed=7, hidden=True, number=1, extra=None):
    manifest = load(course / "exercises" / "manifest.toml")
    ex = manifest.get(number)
    snap = from_source(str(course / "sub" / ex.module_file), ex.module_file, source.encode(), extra)
    return runner.grade(manifest, [number], course_root=course, snapshots={number: snap}, seed=seed,
                        hidden_root=course / "solutions" if hidden else None).exercises[0]


def git_fork(path: Path, files: dict[str, str], links: dict[str, str] = ()) -> Path:
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    for rel, target in dict(links).items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).symlink_to(target)
    subprocess.run([*GIT, "init", "-q", str(path)], check=True)
    subprocess.run([*GIT, "-C", str(path), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(path), "commit", "-q", "-m", "work"], check=True)
    return path


# --- (1) links -------------------------------------------------------------------------------

def test_1_a_committed_link_to_the_solution_earns_nothing_anywhere(course, tmp_path):
    target = "../../../course/solutions/01_double/double.py"  # the instructor workflow's layout
    fork = git_fork(tmp_path / "submission", {"exercises/02_triple/triple.py": "x = 1\n"},
                    {"exercises/01_double/double.py": target})
    assert (fork / "exercises" / "01_double" / "double.py").read_text() == SOL1  # the link does reach it
    manifest = load(course / "exercises" / "manifest.toml")
    ex = manifest.get(1)
    for snap in (read_submission(fork, ex.dir, ex.files),
                 read_commit(fork, runner_head(fork), ex.dir, ex.files)):
        assert snap.problem is not None and snap.problem.kind == "link" and not snap.files
    outcome = ci.run(course, fork, course / "solutions", numbers=[1])  # grade ci: the committed tree
    ex1 = outcome.run.exercises[0]
    assert ex1.score == 0 and all("link" in c.message for c in ex1.checks if c.status != "not_run")
    direct = runner.grade(manifest, [1], course_root=course, submission_root=fork, hidden_root=course / "solutions")
    assert direct.exercises[0].score == 0  # grade exercise --submission: the folder on disk


def runner_head(repo: Path) -> str:
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_1_links_to_devices_and_folders_are_never_read(tmp_path):
    folder = tmp_path / "exercises" / "01_double"
    folder.mkdir(parents=True)
    (folder / "double.py").symlink_to("/dev/zero")
    snap = read_submission(tmp_path, "01_double", ("double.py",))
    assert snap.problem.kind == "link" and snap.seed(1) == snap.seed(1)  # no read at all: it returns at once
    (folder / "double.py").unlink()
    (folder / "double.py").mkdir()
    assert read_submission(tmp_path, "01_double", ("double.py",)).problem.kind == "not_a_file"
    (folder / "double.py").rmdir()
    (folder / "double.py").write_text(SOL1)
    (folder / "helper.py").symlink_to("/etc/passwd")
    (tmp_path / "elsewhere").mkdir()
    snap = read_submission(tmp_path, "01_double", ("double.py",))
    assert snap.problem is None and set(snap.files) == {"double.py"} and "helper.py (a link)" in snap.left_out
    # a folder on the way that is a link is refused too
    shutil.move(str(tmp_path / "exercises"), str(tmp_path / "real"))
    (tmp_path / "exercises").symlink_to(tmp_path / "real")
    assert read_submission(tmp_path, "01_double", ("double.py",)).problem.kind == "link"


# --- (2) the course's checkout, the grader's environment ------------------------------------------

PEEK = """
import os, sys
def peek(paths):
    out = {"env": sorted(os.environ), "path": list(sys.path), "cwd": os.getcwd()}
    for p in paths:
        try:
            with open(p, "rb") as f:
                f.read(1)
            out[p] = "read"
        except OSError as exc:
            out[p] = type(exc).__name__
    return out
def double(x):
    return 2 * x
"""


@root_only
def test_2_as_root_the_course_checkout_and_its_git_are_out_of_reach(course, tmp_path, monkeypatch):
    (course / ".git").mkdir()
    (course / ".git" / "config").write_text("[http]\n  extraheader = AUTHORIZATION: basic c2VjcmV0\n")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_secret_token")
    monkeypatch.setenv("PYTHONPATH", str(course))
    manifest = load(course / "exercises" / "manifest.toml")
    secrets = [course / ".git" / "config", course / "solutions" / "01_double" / "double.py",
               course / "exercises" / "manifest.toml"]
    snap = from_source(str(tmp_path / "double.py"), "double.py", PEEK.encode())
    runner.grade(manifest, [2], course_root=course, hidden_root=course / "solutions")  # closes the course
    assert not sandbox_user.readable_by_others(course / ".git" / "config")
    with Sandbox(snap, timeout_s=30) as sb:
        seen = sb.call("peek", [str(p) for p in secrets])
    assert {seen[str(p)] for p in secrets} == {"PermissionError"}
    assert "GITHUB_TOKEN" not in seen["env"] and "PYTHONPATH" not in seen["env"]
    assert not any(str(course) in p for p in seen["path"]) and str(course) not in seen["cwd"]


# --- (3) nothing planted where a worker or zygote starts runs ---------------------------------------

def test_3_code_planted_in_the_temp_folder_or_the_submission_never_runs(tmp_path):
    import tempfile

    from grader.sandbox.client import Zygote

    marker = tmp_path / "ran"
    planted = Path(tempfile.gettempdir()) / "grader"
    payload = f"open({str(marker)!r}, 'w').write('planted code ran')\n"
    existed = planted.exists()
    try:
        if not existed:
            (planted / "sandbox").mkdir(parents=True)
            for name in ("__init__.py", "sandbox/__init__.py", "sandbox/zygote.py", "sandbox/worker.py"):
                (planted / name).write_text(payload)
        files = {"grader/__init__.py": payload.encode(), "grader/sandbox/__init__.py": payload.encode(),
                 "grader/sandbox/worker.py": payload.encode(), "jax.py": payload.encode()}
        snap = from_source(str(tmp_path / "double.py"), "double.py", SOL1.encode(), files)
        with Zygote() as z:
            for zygote in (z, None):
                with Sandbox(snap, timeout_s=30, zygote=zygote) as sb:
                    assert sb.call("double", np.ones(2, np.float32)).tolist() == [2.0, 2.0]
        assert not marker.exists()
    finally:
        if not existed:
            shutil.rmtree(planted, ignore_errors=True)


# --- (4, 6) the compile cache ---------------------------------------------------------------------

def test_4_6_the_compile_cache_is_keyed_by_content_never_followed_and_off_where_grades_count(tmp_path, monkeypatch):
    from grader import cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    a = from_source("a.py", "double.py", b"x = 1\n")
    b = from_source("b.py", "double.py", b"x = 2\n")
    if os.geteuid() == 0:
        assert runner.compile_cache_for(a) is None  # as root: never (sandbox users are other users)
    folder_a, folder_b = cache.compile_cache_folder(a.digest()), cache.compile_cache_folder(b.digest())
    assert folder_a != folder_b and folder_a.parent == folder_b.parent  # what one file wrote, another never reads
    shutil.rmtree(folder_b)
    (folder_a.parent / b.digest()).symlink_to(tmp_path)  # planted link in place of a key folder
    assert cache.compile_cache_folder(b.digest()) is None
    elsewhere = tmp_path / "not-mine"
    elsewhere.mkdir()
    shutil.rmtree(tmp_path / "xdg")
    (tmp_path / "xdg").mkdir()
    (tmp_path / "xdg" / "jax-exercises-grader").symlink_to(elsewhere)  # a planted base
    assert cache.compile_cache_folder(a.digest()) is None and not any(elsewhere.iterdir())


# --- (5) a named sandbox account ---------------------------------------------------------------------

@root_only
def test_5_a_named_account_is_held_by_one_grading_and_cleaned_after_it(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_SANDBOX_USER", "nobody")
    src = ("import os, subprocess\n"
           "def daemon():\n    try:\n        subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
           "        return 'started'\n    except OSError as exc:\n        return type(exc).__name__\n")
    snap = from_source(str(tmp_path / "d.py"), "d.py", src.encode())
    with Sandbox(snap, timeout_s=30) as sb:
        assert sb.user.name == "nobody" and sb.call("daemon") == "PermissionError"
        uid = sb.user.uid
        assert sandbox_user._held[uid][0] == 1  # the machine-wide lock is held while it lives
    assert uid not in sandbox_user._held
    left = subprocess.run(["pgrep", "-u", str(uid), "sleep"], capture_output=True, text=True).stdout.split()
    assert not left


# --- (7) measurements taken in the learner's process ---------------------------------------------------
#
# The guard has three outcomes (grader/sandbox/guard.py): what is aimed at the grader or its
# meter is an accusation (status `integrity`, with the learner's file and line); what
# isolation makes harmless or no exercise needs is refused quietly (an ordinary exception,
# nothing recorded); the rest is allowed.  Every forgery below used to be caught; each row
# says which way it is caught now.

#: accused: refused, recorded with evidence, the measured checks score 0
ACCUSED = {
    "answer_pipe": "import os\nos.write(1001, b'{\"id\": 2, \"ok\": 4}\\n')\n",
    "code_spoof": "import jax\nexec(compile('def f(x): return x', jax.__file__, 'exec'), {})\n",
    # the grader's true source, read the way tracebacks read it, run under its own name
    "grader_source": ("import linecache, os, sys\n"
                      "root = next(p for p in sys.path if os.path.isfile(os.path.join(p, 'grader', 'compiles.py')))\n"
                      "path = os.path.join(root, 'grader', 'compiles.py')\n"
                      "exec(compile(''.join(linecache.getlines(path)), path, 'exec'), {'__name__': 'x'})\n"),
    "code_object_spoof": "import jax\n_ = compile('1', 'x.py', 'eval').replace(co_filename=jax.__file__)\n",
    "function_from_library_code": "import json, types\n_ = types.FunctionType(json.dumps.__code__, {})\n",
    "code_swap": "import json\ndef g():\n    pass\ng.__code__ = json.dumps.__code__\n",
    "library_code_exec": "import json\nexec(json.dumps.__code__, {})\n",
    # no frame, no audit event: the class graph to a grader class, its method's module globals
    "grader_namespace": ("todo, found = [object], {}\nwhile todo:\n    for k in type.__subclasses__(todo.pop()):\n"
                         "        if id(k) not in found:\n            found[id(k)] = k\n            todo.append(k)\n"
                         "klass = [k for k in found.values() if k.__name__ == 'Context' and "
                         "str(k.__module__).startswith('grader.')][0]\n"
                         "klass.dispatch.__globals__['to_jax'] = lambda tree: tree\n"),
}
#: refused quietly: the operation raises in the learner's code and reaches nothing; not an accusation
REFUSED = {
    "gc": ("import gc\n_ = gc.get_objects()\n", PermissionError),
    "frames": ("import inspect\n_ = inspect.stack()\n", PermissionError),
    "traceback_frames": ("import traceback\ntry:\n    1 / 0\nexcept ZeroDivisionError as e:\n"
                         "    _ = [f for f, _ in traceback.walk_tb(e.__traceback__)]\n", PermissionError),
    # (importlib.import_module skips the "import" event: the read of the grader's file is refused instead)
    "grader_walker": ("import importlib\nimportlib.import_module('grader.ir')\n", PermissionError),
    "grader_import": ("import grader.ir\n", ImportError),
    "other_threads": ("import sys\n_ = sys._current_frames()\n", PermissionError),
    "trace_hook": ("import sys\nsys.settrace(lambda *a: None)\n", PermissionError),
    "getframe_from_c": ("import sys\n_ = list(map(sys._getframe, [0]))\n", PermissionError),
}

_TOUCH_ONCE = ("def _wrap():\n    inner = double\n    def double_(x):\n        if not _seen:\n"
               "            _seen.append(1)\n            try:\n                touch()\n            except Exception as exc:\n"
               "                _seen.append(type(exc).__name__ + ': ' + str(exc))\n        return inner(x)\n"
               "    return double_\n\n\ndouble = _wrap()\n\ndef seen():\n    return _seen[1:]\n")


def _touching(code: str) -> str:
    body = "".join("    " + line + "\n" for line in code.splitlines())
    return SOL1 + "\n\n_seen = []\n\ndef touch():\n" + body + "\n\n" + _TOUCH_ONCE


@pytest.mark.parametrize("trick", sorted(ACCUSED))
def test_7_tampering_is_refused_recorded_with_its_line_and_zeroes_the_measured_checks(course, trick):
    source = _touching(ACCUSED[trick])
    ex = grade_source(course, source)
    by = {c.name: c for c in ex.checks}
    assert ex.integrity, f"{trick}: nothing was recorded"
    assert by["compiles_once"].status == "integrity" and by["compiles_once"].score == 0
    assert by["doubles"].passed and by["doubles"].score == 3  # not measured: its verdict rests on values alone
    assert "integrity" in json.dumps(ex.to_dict())
    if trick != "answer_pipe":  # the others name the learner's line, quoted from the file graded
        line = source.splitlines().index(next(x for x in source.splitlines() if x.strip() and
                                              x.strip() in ACCUSED[trick].splitlines()[-1])) + 1
        assert any(f"double.py, line {line}: `" in r for r in ex.integrity), ex.integrity


@pytest.mark.parametrize("trick", sorted(REFUSED))
def test_7_what_isolation_makes_harmless_is_refused_quietly_and_accuses_no_one(tmp_path, trick):
    code, exc_type = REFUSED[trick]
    snap = from_source(str(tmp_path / "double.py"), "double.py", _touching(code).encode())
    with Sandbox(snap, timeout_s=60) as sb:
        np.testing.assert_allclose(sb.call("double", np.ones(3, np.float32)), 2.0)
        seen = sb.call("seen")
        assert sb.integrity == [] and sb.refusals, (trick, sb.refusals)
    assert len(seen) == 1 and seen[0].startswith(exc_type.__name__) and "refused by the grader's sandbox" in seen[0]
    assert sb.refusals[-1].file.endswith("double.py") and sb.refusals[-1].line > 0  # where the learner can look


#: A replacement that puts the original back when the grader calls it: the snapshot compared
#: after the request would find nothing, so the grader's code must never call it
#: (``grader.sandbox.freeze``).  Either a grader module's global (``generic.ir``) or an
#: attribute read off a grader module (``ir.jaxpr_summary``) is replaced while ``jaxpr_of``
#: traces ``double``, by one that forges the summary.
PUT_BACK = {
    "module_global": ("generic", "ir"),
    "module_attribute": ("generic.ir", "jaxpr_summary"),
}
_PUT_BACK_SOURCE = """
import sys, types
_log = []

def _grader_module(path):
    todo, found = [object], {{}}
    while todo:
        for k in type.__subclasses__(todo.pop()):
            if id(k) not in found:
                found[id(k)] = k
                todo.append(k)
    klass = [k for k in found.values() if k.__name__ == "Context" and str(k.__module__).startswith("grader.")][0]
    owner = klass.dispatch.__globals__["_PROBES"]["generic"]
    for part in path.split(".")[1:]:
        owner = getattr(owner, part)
    return owner

def double(x):
    owner = _grader_module({owner!r})
    real = getattr(owner, {name!r})

    def put_back():
        setattr(owner, {name!r}, real)
        _log.append("called")

    if {name!r} == "ir":
        class Fake:
            def __getattr__(self, attr):
                put_back()
                return lambda *a, **k: {{"forged": True}}
        setattr(owner, {name!r}, Fake())
    else:
        def fake(*a, **k):
            put_back()
            return {{"forged": True}}
        setattr(owner, {name!r}, fake)
    _log.append("replaced")
    return 2 * x

def log():
    return list(_log)
"""


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the grader's code is frozen on CPython 3.11 only")
@pytest.mark.parametrize("case", sorted(PUT_BACK))
def test_7_a_grader_global_replaced_and_put_back_within_a_request_is_never_called(tmp_path, case):
    owner, name = PUT_BACK[case]
    snap = from_source(str(tmp_path / "double.py"), "double.py",
                       _PUT_BACK_SOURCE.format(owner=owner, name=name).encode())
    with Sandbox(snap, timeout_s=60) as sb:
        summary = sb.probe("generic:jaxpr_of", "double", [np.ones(3, np.float32)])
        log = sb.call("log")
        integrity = list(sb.integrity)
    assert log == ["replaced"], log  # the replacement was made, and the grader never called it
    assert "forged" not in summary and summary, summary  # the probe's own summary of the trace
    # left in place, the replacement is a lasting change: the snapshot accuses it
    assert any(f"grader.probes.{owner}.{name}" in str(r) or f"grader.ir.{name}" in str(r) for r in integrity), integrity


_CLASS_PUT_BACK_SOURCE = """
_log = []

def _grader_class(name, module):
    todo, found = [object], {}
    while todo:
        for k in type.__subclasses__(todo.pop()):
            if id(k) not in found:
                found[id(k)] = k
                todo.append(k)
    return [k for k in found.values() if k.__name__ == name and k.__module__ == module][0]

def double(x):
    klass = _grader_class("CompileRecorder", "grader.compiles")
    real = klass.to_plain

    def fake(self):
        klass.to_plain = real  # put back before the snapshot is compared
        _log.append("called")
        return {"forged": True}

    try:
        klass.to_plain = fake
        _log.append("replaced")
    except TypeError as exc:
        _log.append("refused: " + str(exc))
    return 2 * x

def log():
    return list(_log)
"""


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the grader's classes are sealed on CPython 3.11 only")
def test_7_a_grader_method_cannot_be_replaced_even_for_one_request(tmp_path):
    snap = from_source(str(tmp_path / "double.py"), "double.py", _CLASS_PUT_BACK_SOURCE.encode())
    with Sandbox(snap, timeout_s=60) as sb:
        record = sb.probe("generic:count_compiles", "double", [{"args": [np.ones(3, np.float32)]}])
        log = sb.call("log")
    assert len(log) == 1 and log[0].startswith("refused: ") and "immutable type" in log[0], log
    assert "forged" not in record["compiles"] and record["outputs"], record


_JAX_TAMPER_SOURCE = """
import collections, sys, types
import jax
import jax.extend.core
import jax.numpy as jnp
from jax._src.interpreters import pxla
from jax._src.lax.control_flow import loops

_log = []

def _try(label, change):
    try:
        change()
        _log.append(label + ": done")
    except TypeError as exc:
        _log.append(label + ": refused: " + str(exc))

# rename the loop primitive; hide nested jaxprs from a walk that asks jax.extend.core; count
# nothing called "scan"; make every compiled program report no flops
_try("rename", lambda: setattr(loops.scan_p, "name", "mapped"))
_fake = types.ModuleType("jax.extend.core")
_fake.__dict__.update(vars(jax.extend.core))
_fake.jaxprs_in_params = lambda params: []
_try("sys.modules", lambda: sys.modules.__setitem__("jax.extend.core", _fake))
_update = collections.Counter.update
_try("Counter", lambda: setattr(collections.Counter, "update",
                                lambda self, it=None, **kw: _update(self, it if it is None or isinstance(it, dict)
                                                                    else [x for x in it if x != "scan"], **kw)))
_try("cost_analysis", lambda: setattr(pxla.MeshExecutable, "cost_analysis", lambda self: {"flops": 0.0}))
_try("name property", lambda: setattr(type(loops.scan_p), "name", property(lambda self: "mapped")))
# make a probe's own blocking and byte counts lie, and a sharding report other blocks
from jax._src import array as _array, sharding as _sharding
_try("nbytes", lambda: setattr(_array.ArrayImpl, "nbytes", property(lambda self: 0)))
_try("block_until_ready", lambda: setattr(_array.ArrayImpl, "block_until_ready", lambda self: self))
_try("devices_indices_map", lambda: setattr(_sharding.Sharding, "devices_indices_map", lambda self, shape: {}))

def mapped(x):
    return jax.lax.map(jnp.sin, x)

def log():
    return list(_log)
"""


def test_7_jaxs_objects_the_probes_read_are_pinned_before_learner_code(tmp_path):
    """A file that renames JAX's scan primitive, swaps ``jax.extend.core`` for a module whose
    ``jaxprs_in_params`` hides every nested jaxpr, patches ``collections.Counter`` and JAX's
    executable class: the probe's summary still shows the loop and its body
    (``grader.sandbox.pins``), and JAX's measured classes refuse to change."""
    snap = from_source(str(tmp_path / "mapped.py"), "mapped.py", _JAX_TAMPER_SOURCE.encode())
    with Sandbox(snap, timeout_s=60) as sb:
        summary = sb.probe("generic:jaxpr_of", "mapped", [np.ones(3, np.float32)])
        log = dict(line.split(": ", 1) for line in sb.call("log"))
        integrity = list(sb.integrity)
    assert summary["primitives"].get("scan") == 1 and summary["primitives"].get("sin") == 1, summary
    assert "mapped" not in summary["primitives"], summary
    assert log["cost_analysis"].startswith("refused") and "immutable type" in log["cost_analysis"], log
    assert log["name property"].startswith("refused"), log
    assert all(log[k].startswith("refused") for k in ("nbytes", "block_until_ready", "devices_indices_map")), log
    assert log["rename"] == log["sys.modules"] == log["Counter"] == "done", log  # allowed, and harmless
    # a module JAX had loaded, replaced in sys.modules, is a lasting change of what the grader holds,
    # and a renamed primitive of JAX's a change of JAX's own (grader.sandbox.pins.rule_tables)
    assert any("_sys_modules[jax.extend.core]" in r for r in integrity), integrity
    assert any("`the primitive scan[name]`" in r for r in integrity), integrity


_RULE_TAMPER = SOL1 + """

import jax
from jax.interpreters import mlir as _mlir
from jax.extend.core import Primitive as _Primitive

_own = _Primitive("learners_own")  # a rule for a primitive of one's own: allowed
_own.def_abstract_eval(lambda x: x)
_mlir.register_lowering(_own, _mlir.lower_fun(lambda x: x, multiple_results=False))


def tamper():
    _mlir.register_lowering(jax.lax.sin_p, _mlir.lower_fun(jax.numpy.cos, multiple_results=False), platform="cpu")
"""


@pytest.mark.parametrize("when", ["import", "call"])
def test_7_a_rule_of_jaxs_own_primitive_replaced_is_an_accusation_that_voids_every_check(course, when):
    """``mlir.register_lowering`` for one of JAX's primitives (a lowering that compiles another
    program than the one traced) is accused (``grader.sandbox.pins.rule_tables``, watched after
    each request), and the accusation voids every check, the value checks too: what ran is not
    what was traced.  A rule for a primitive of the file's own is no accusation."""
    source = _RULE_TAMPER + ("tamper()\n" if when == "import" else
                             "\n_seen = []\n\ndef touch():\n    tamper()\n\n\n" + _TOUCH_ONCE)
    ex = grade_source(course, source)
    assert any("one of its own primitives" in r and "[sin]" in r for r in ex.integrity), ex.integrity
    assert all(c.status == "integrity" and c.score == 0 for c in ex.checks), [(c.name, c.status) for c in ex.checks]
    clean = grade_source(course, _RULE_TAMPER)
    assert not clean.integrity and clean.score == clean.max_score, (clean.integrity, clean.score)


def test_7_an_accusation_names_its_file_and_line_in_every_report_format(course, tmp_path):
    from rich.console import Console

    from grader import render
    from grader.reports.github import annotations, job_summary
    from grader.reports.gradescope import to_gradescope_json
    from grader.reports.junit import to_junit_xml

    source = _touching(ACCUSED["code_spoof"])
    line = next(i for i, x in enumerate(source.splitlines(), 1) if "exec(compile(" in x)
    manifest = load(course / "exercises" / "manifest.toml")
    snap = from_source(str(course / "sub" / "double.py"), "double.py", source.encode())
    run = runner.grade(manifest, [1], course_root=course, snapshots={1: snap}, seed=7,
                       hidden_root=course / "solutions")
    evidence = f"double.py, line {line}: `exec(compile("
    console = Console(record=True, width=400, color_system=None)
    render.print_run(run, console)
    outputs = {"terminal": console.export_text(), "json": render.to_json(run), "gradescope": to_gradescope_json(run),
               "junit": to_junit_xml(run), "github summary": job_summary(run),
               "github annotations": "\n".join(annotations(run, course))}
    for name, text in outputs.items():
        flat = text.replace("\\n", " ").replace("&#10;", " ").replace("%0A", " ").replace("\n", " ")
        assert evidence in flat or evidence.replace("`", "\\`") in flat, (name, text[:3000])


def test_7_clearing_jaxs_caches_is_no_accusation_the_checks_that_count_say_why(course):
    # honest in a timing exercise; here it also lowers nothing: the counts are unmeasurable
    source = "import jax\n\n@jax.jit\ndef _double(x):\n    return 2 * x\n\ndef double(x):\n" \
             "    out = _double(x)\n    jax.clear_caches()\n    return out\n"
    ex = grade_source(course, source)
    by = {c.name: c for c in ex.checks}
    assert not ex.integrity and by["doubles"].passed
    assert by["compiles_once"].status == "failed" and "cleared JAX's caches" in by["compiles_once"].message


def test_7_rebinding_the_cache_function_the_meter_reads_is_an_accusation_naming_the_replacement(course):
    source = SOL1 + ("\n\nfrom jax._src.interpreters import pxla as _pxla\n_real = _pxla._cached_compilation\n\n\n"
                     "def _quiet(*args, **kwargs):\n    return _real(*args, **kwargs)\n\n\n"
                     "_pxla._cached_compilation = _quiet\n")
    line = source.splitlines().index("def _quiet(*args, **kwargs):") + 1
    ex = grade_source(course, source)
    by = {c.name: c for c in ex.checks}
    assert by["compiles_once"].status == "integrity" and by["compiles_once"].score == 0
    assert any("cache function" in r and f"double.py, line {line}: `def _quiet" in r for r in ex.integrity), ex.integrity


def test_7_a_check_lost_to_a_quiet_refusal_says_what_to_do_instead(course):
    ex = grade_source(course, "import inspect\n\ndef double(x):\n    inspect.stack()\n    return 2 * x\n")
    by = {c.name: c for c in ex.checks}
    assert not ex.integrity and not by["doubles"].passed and not by["doubles_public"].passed
    public, hidden = by["doubles_public"].message, by["doubles"].message
    assert "refused by the grader's sandbox: asking for a live stack frame" in public
    assert "traceback.extract_stack()" in public and "double.py:4" in public
    # a hidden check names the refusal and the advice, never the line or the detail
    assert "raised PermissionError" in hidden and "the grader's sandbox refused asking for a live stack frame" in hidden
    assert "traceback.extract_stack()" in hidden and "double.py" not in hidden and "sys._getframe]" not in hidden


#: Attacks built on what is now refused quietly: each tries to lower the compile count of a
#: `double` that compiles on every call; the refusal stops it, so the check still fails.
QUIET_ATTACKS = {
    "gc_walk_to_the_recorder": "import gc\nfor o in gc.get_objects():\n    if type(o).__name__ == 'CompileRecorder':\n"
                               "        o.__dict__.clear()\n",
    "frames_to_the_probe": "import inspect\nfor info in inspect.stack():\n    info.frame.f_locals.clear()\n",
    "trace_hook_on_the_probe": "import sys\nsys.settrace(lambda frame, event, arg: None)\n",
    "import_the_recorder": "import grader.compiles\ngrader.compiles.CompileRecorder.__init__ = lambda self, *a, **k: None\n",
}


@pytest.mark.parametrize("attack", sorted(QUIET_ATTACKS))
def test_7_attacks_on_what_is_refused_quietly_still_score_nothing(course, attack):
    body = "".join("        " + line + "\n" for line in QUIET_ATTACKS[attack].splitlines())
    source = ("import jax\n\n\ndef double(x):\n    try:\n" + body + "    except Exception:\n        pass\n"
              "    return jax.jit(lambda v: 2 * v)(x)  # a new function: it compiles on every call\n")
    ex = grade_source(course, source)
    by = {c.name: c for c in ex.checks}
    assert by["doubles"].passed and not ex.integrity
    assert by["compiles_once"].status == "failed" and by["compiles_once"].score == 0


def test_7_compiles_of_renamed_exec_made_or_hidden_functions_count_and_silencing_hides_none(tmp_path):
    src = """
import functools, logging, jax, jax.numpy as jnp
from jax._src import monitoring

def _made(x):
    ns = {}
    exec("def broadcast_in_dim(v):\\n    return v * 2\\n", {"jnp": jnp}, ns)   # a JAX helper's name
    return jax.jit(ns["broadcast_in_dim"])(x)

def double(x):
    logging.disable(logging.CRITICAL)
    jax.config.update("jax_log_compiles", False)
    monitoring._unregister_event_duration_listener_by_callback = None
    monitoring.clear_event_listeners() if hasattr(monitoring, "clear_event_listeners") else None
    return _made(x)
"""
    calls = [{"args": [np.ones(n, np.float32)]} for n in (3, 4, 5)]
    with Sandbox(from_source(str(tmp_path / "double.py"), "double.py", src.encode()), timeout_s=60) as sb:
        _, compiles = count_compiles(sb, None, "double", calls)
    assert compiles.attributed == 3  # three fresh functions, three compilations: all the learner's


# --- (8) hidden inputs never reach public messages ---------------------------------------------------

def test_8_public_checks_run_in_a_sandbox_of_their_own(course):
    hidden = course / "solutions" / "01_double" / "test_hidden.py"
    hidden.write_text(hidden.read_text() + "\n\ndef test_zz_remember(submission):\n"
                      "    submission.call('remember', 'hidden-secret-123')\n")
    public = course / "exercises" / "01_double" / "test_public.py"
    public.write_text(public.read_text() + "\n\ndef test_doubles_public_recall(submission):\n"
                      "    got = submission.call('recall')\n    assert got is None, f'leaked: {got}'\n")
    manifest = course / "exercises" / "manifest.toml"
    manifest.write_text(manifest.read_text().replace(
        '  name = "doubles"\n', '  name = "zz_remember"\n  visibility = "hidden"\n  points = 0\n'
        '  summary = "-"\n  feedback = "-"\n\n  [[exercise.checks]]\n  name = "doubles"\n', 1).replace(
        '  name = "doubles_public"\n', '  name = "doubles_public_recall"\n  visibility = "public"\n  points = 0\n'
        '  summary = "-"\n\n  [[exercise.checks]]\n  name = "doubles_public"\n', 1))
    src = SOL1 + "\n_box = []\n\ndef remember(v):\n    _box.append(v)\n\ndef recall():\n    return _box[0] if _box else None\n"
    ex = grade_source(course, src)
    by = {c.name: c for c in ex.checks}
    assert by["zz_remember"].passed and by["doubles_public_recall"].passed


def test_8_hidden_messages_quote_only_builtin_exception_names(course):
    src = ("import jax\n\ndef double(x):\n    name = 'Shape_' + '_'.join(map(str, x.shape))\n"
           "    raise type(name, (Exception,), {})('boom')\n")
    ex = grade_source(course, src)
    doubles = {c.name: c for c in ex.checks}["doubles"]
    assert "Shape_" not in doubles.message and "raised an exception" in doubles.message
    builtin = grade_source(course, "def double(x):\n    raise ValueError('no')\n")
    assert "raised ValueError" in {c.name: c for c in builtin.checks}["doubles"].message


# --- (9) an interrupt is never a grade --------------------------------------------------------------

@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_9_an_interrupted_grade_ci_writes_incomplete_results_without_a_score(course, tmp_path, signum):
    fork = tmp_path / "fork"
    (fork / "exercises" / "01_double").mkdir(parents=True)
    (fork / "exercises" / "01_double" / "double.py").write_text(SOL1)
    (fork / "exercises" / "02_triple").mkdir(parents=True)
    (fork / "exercises" / "02_triple" / "triple.py").write_text("def triple(x):\n    while True:\n        pass\n")
    out = tmp_path / "out"
    env = {**os.environ, "GRADER_COURSE": str(course)}
    proc = subprocess.Popen([sys.executable, "-m", "grader.cli", "ci", "--submission", str(fork), "--hidden",
                             str(course / "solutions"), "--json", str(out / "r.json"), "--instructor",
                             "--gradescope", str(out / "gs.json"), "--junit", str(out / "j.xml"), "-j", "1"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(8)  # exercise 1 is graded by now; exercise 2 hangs
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    data = json.loads((out / "r.json").read_text())
    assert data["incomplete"] is True and data["score"] is None
    gs = json.loads((out / "gs.json").read_text())
    assert "score" not in gs and gs["tests"] == [] and gs["extra_data"]["incomplete"] is True
    assert "interrupted" in (out / "j.xml").read_text()
    imported = subprocess.run([sys.executable, "-m", "grader.cli", "gradebook", "import", "--gradebook",
                               str(tmp_path / "g.sqlite"), str(out / "r.json")], env=env, capture_output=True,
                              text=True)
    assert imported.returncode == 2 and "incomplete" in imported.stderr


# --- (10) the sandbox is closed --------------------------------------------------------------------

def test_10_no_network_no_writes_outside_and_limits_set(tmp_path):
    src = """
import os, resource, socket
def probe():
    out = {}
    for label, fn in [("socket", lambda: socket.create_connection(("127.0.0.1", 22), timeout=1)),
                      ("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM)),
                      ("write_tmp", lambda: open("/tmp/grade-test-escape", "w")),
                      ("write_dev_shm", lambda: open("/dev/shm/grade-test-escape", "w")),
                      ("own_tmp", lambda: open(os.path.join(os.environ["TMPDIR"], "ok.txt"), "w").write("x"))]:
        try:
            fn()
            out[label] = "ok"
        except OSError as exc:
            out[label] = type(exc).__name__
    out["fsize"] = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    out["nofile"] = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    out["nproc"] = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    return out
"""
    with Sandbox(from_source(str(tmp_path / "p.py"), "p.py", src.encode()), timeout_s=30) as sb:
        got = sb.call("probe")
    assert got["socket"] == got["udp"] == got["write_tmp"] == got["write_dev_shm"] == "PermissionError"
    assert got["own_tmp"] == "ok"
    assert 0 < got["fsize"] <= 256 << 20 and 0 < got["nofile"] <= 1024
    if os.geteuid() == 0:
        assert 0 < got["nproc"] <= 1024
    assert not Path("/tmp/grade-test-escape").exists() and not Path("/dev/shm/grade-test-escape").exists()


@root_only
def test_10_files_a_sandbox_user_left_in_shared_folders_are_removed():
    user = sandbox_user.SandboxUser("uid test", sandbox_user.UID_BASE + 63, sandbox_user.NOGROUP, per_sandbox=True)
    left = Path("/tmp") / "grade-test-left-behind"
    left.mkdir()
    (left / "inner").write_text("x")
    os.lchown(left, user.uid, user.gid)
    os.lchown(left / "inner", user.uid, user.gid)
    mine = Path("/tmp") / "grade-test-not-theirs"
    mine.write_text("keep")
    try:
        removed = sandbox_user.remove_files_of(user)
        assert str(left) in removed and not left.exists() and mine.exists()
    finally:
        mine.unlink()
        shutil.rmtree(left, ignore_errors=True)


# --- (11) the trusted side cannot be stalled or crashed ------------------------------------------------

def test_11_a_lone_surrogate_reaches_no_writer_and_every_report_is_written(course, tmp_path):
    src = "def double(x):\n    raise ValueError('bad \\ud800 text \\x1b[31mred\\x1b[0m')\n"
    ex = grade_source(course, src, hidden=False)
    message = {c.name: c for c in ex.checks}["doubles_public"].message
    message.encode("utf-8")  # no lone surrogate survives decoding
    run = runner.run_result([ex], submission=tmp_path)
    outputs = ci.Outputs(json=tmp_path / "r.json", gradescope=tmp_path / "gs.json", junit=tmp_path / "j.xml")
    written, failed = ci.write_outputs(run, outputs, tmp_path)
    assert not failed and all(p.stat().st_size > 0 for p in written) and len(written) == 3
    from grader.reports import github

    assert not any("\x1b" in line for line in github.annotations(run, tmp_path))


def test_11_a_check_stuck_on_the_trusted_side_becomes_a_grader_error(course, monkeypatch):
    from grader import pytest_plugin

    monkeypatch.setattr(pytest_plugin, "CHECK_DEADLINE_S", 1.0)
    manifest = course / "exercises" / "manifest.toml"
    manifest.write_text(manifest.read_text().replace("timeout_s = 20", "timeout_s = 1", 1))
    hidden = course / "solutions" / "01_double" / "test_hidden.py"
    hidden.write_text(hidden.read_text().replace("def test_doubles(submission, rng):\n",
                                                 "def test_doubles(submission, rng):\n    while True:\n        pass\n"))
    t0 = time.monotonic()
    ex = grade_source(course, SOL1)
    assert time.monotonic() - t0 < 30
    doubles = {c.name: c for c in ex.checks}["doubles"]
    assert doubles.status == "error" and doubles.score == 0 and "TrustedTimeout" in doubles.private


# --- (12) leftovers ---------------------------------------------------------------------------------

def test_12_grading_a_fixture_by_file_writes_nothing_to_disk(tmp_path):
    import tempfile

    repo = Path(__file__).resolve().parents[1]
    fixture = next((repo / "fixtures" / "03_per_example_grad_norms").glob("*/grad_norms.py"))
    before = set(os.listdir(tempfile.gettempdir()))
    env = {**os.environ}
    done = subprocess.run([sys.executable, "-m", "grader.cli", "exercise", "3", "--file", str(fixture),
                           "--public-only", "--json"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr
    assert json.loads(done.stdout)["exercises"][0]["files"] == [str(fixture)]
    new = {n for n in set(os.listdir(tempfile.gettempdir())) - before if n.startswith("grade-fixture")}
    assert not new


def test_12_single_file_seeds_come_from_the_file(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text(SOL1)
    b.write_text(SOL1 + "# another\n")
    sa, sb = single_file(a, "double.py"), single_file(b, "double.py")
    assert sa.seed(1) != sb.seed(1) and sa.display_path == str(a)


# --- (13) names from git objects ----------------------------------------------------------------------

def _git_out(repo: Path, *args: str, input: bytes | None = None) -> str:
    return subprocess.run([*GIT, "-C", str(repo), *args], input=input, capture_output=True, check=True
                          ).stdout.decode().strip()


def raw_tree(repo: Path, entries: list[tuple[str, bytes, str]]) -> str:
    """A tree object written as given (``git mktree`` refuses what these tests need)."""
    data = b"".join(mode.encode() + b" " + name + b"\0" + bytes.fromhex(sha) for mode, name, sha in entries)
    return _git_out(repo, "hash-object", "-w", "--literally", "-t", "tree", "--stdin", input=data)


def raw_fork(path: Path, build=lambda repo: ([], [])) -> Path:
    """A repository whose HEAD commit holds ``exercises/01_double`` made of the entries
    ``build(repo)`` returns (plus the reference solution's ``double.py`` unless they name
    one), and those extra entries in its top folder."""
    subprocess.run([*GIT, "init", "-q", str(path)], check=True)
    ex1_entries, top_extra = build(path)
    if not any(name == b"double.py" for _, name, _ in ex1_entries):
        ex1_entries = [("100644", b"double.py", _blob(path, SOL1.encode())), *ex1_entries]
    exercises = raw_tree(path, [("40000", b"01_double", raw_tree(path, ex1_entries))])
    top = raw_tree(path, [("40000", b"exercises", exercises), *top_extra])
    _git_out(path, "update-ref", "HEAD", _git_out(path, "commit-tree", top, "-m", "work"))
    return path


def _blob(repo: Path, data: bytes) -> str:
    return _git_out(repo, "hash-object", "-w", "--stdin", input=data)


def bad_entries(repo: Path, planted: Path) -> dict[str, tuple[list, list]]:
    """Per case: (entries of exercises/01_double, extra entries of the top folder)."""
    marker = _blob(repo, b"written outside the sandbox\n")
    escape = raw_tree(repo, [("100644", b"escape.txt", marker)])
    stub = _blob(repo, b"def double(x):\n    raise NotImplementedError\n")
    sol = _blob(repo, SOL1.encode())
    return {
        "absolute": ([("100644", str(planted).encode(), marker)], []),
        "dotdot_blob": ([("100644", b"../../../../escape.txt", marker)], []),
        "dotdot_tree": ([("40000", b"..", escape)], []),
        "dot_tree": ([("40000", b".", escape)], []),
        "empty_name": ([("100644", b"", marker)], []),
        "dot_git": ([("40000", b".git", raw_tree(repo, [("100644", b"config", marker)]))], []),
        "dot_git_disguised": ([("40000", b".GiT.", escape)], []),
        "slash_inside": ([("100644", b"sub/inner.txt", marker)], []),
        "nested": ([("40000", b"sub", raw_tree(repo, [("40000", b"deeper", raw_tree(repo, [
            ("100644", b"../../../escape.txt", marker)]))]))], []),
        "duplicate": ([("100644", b"double.py", stub), ("100644", b"double.py", sol)], []),
        "top_folder": ([], [("40000", b"..", escape)]),
    }


def test_13_tree_entries_that_leave_their_folder_or_that_git_refuses_refuse_the_exercise(course, tmp_path):
    ex = load(course / "exercises" / "manifest.toml").get(1)
    planted = tmp_path / "planted" / "abs.txt"
    cases = bad_entries(raw_fork(tmp_path / "probe"), planted)
    for case in cases:
        repo = raw_fork(tmp_path / case, lambda r: bad_entries(r, planted)[case])
        snap = read_commit(repo, runner_head(repo), ex.dir, ex.files)
        assert snap.problem is not None and snap.problem.kind == "bad_commit", case
        assert not snap.files and "itself refuses" in snap.problem.message, case
        assert not any(c in snap.problem.message for c in "\x00\x1b\n"), case
    assert not planted.exists() and not list(tmp_path.rglob("escape.txt"))


def test_13_bad_names_are_refused_by_grade_ci_and_grade_batch_and_nothing_lands_outside(course, tmp_path):
    from grader.course import batch

    planted = tmp_path / "planted" / "abs.txt"
    fork = raw_fork(tmp_path / "fork", lambda r: (
        [e for case in ("absolute", "dotdot_tree", "nested") for e in bad_entries(r, planted)[case][0]], []))
    subprocess.run([*GIT, "clone", "-q", "--bare", str(fork), str(tmp_path / "fork.git")], check=True)
    outcome = ci.run(course, fork, course / "solutions", numbers=[1], jobs=1)
    (ex1,) = outcome.run.exercises
    assert ex1.score == 0 and all("itself refuses" in c.message for c in ex1.checks if c.status != "not_run")
    manifest = load(course / "exercises" / "manifest.toml")
    (tmp_path / "gb").mkdir()
    report = batch.run_batch(manifest, batch.locate_all([str(fork), str(tmp_path / "fork.git")]), course_root=course,
                             hidden_root=course / "solutions", gradebook=tmp_path / "gb" / "g.sqlite", numbers=[1],
                             jobs=1)
    assert len(report.graded) == 2 and all(r.score == 0 for _, r in report.graded) and not report.fetch_errors
    assert all(u.snapshot.problem.kind == "bad_commit" for u in report.units)
    assert not planted.exists() and not list(tmp_path.rglob("escape.txt"))


def test_13_unprintable_names_are_left_out_and_shown_escaped(course, tmp_path):
    name = "notes\n::notice title=Grade::6 of 6\x1b]52;c;QUJD\x07\u202e.txt".encode()
    fork = raw_fork(tmp_path / "fork", lambda r: ([("100644", name, _blob(r, b"x\n"))], []))
    manifest = load(course / "exercises" / "manifest.toml")
    ex = manifest.get(1)
    snap = read_commit(fork, runner_head(fork), ex.dir, ex.files)
    assert snap.problem is None and set(snap.files) == {"double.py"}
    (left,) = snap.left_out
    assert "\\x0a::notice" in left and not any(ord(c) < 32 or c == "\u202e" for c in left)
    outcome = ci.run(course, fork, course / "solutions", numbers=[1], jobs=1)
    assert outcome.run.exercises[0].score == outcome.run.exercises[0].max_score


# --- (14) a learner repository's git configuration --------------------------------------------------------

def armed_fork(path: Path, markers: Path) -> Path:
    """A checkout whose .git/config, hooks, attributes and an included file name a command at
    every key git runs one for; each would leave ``markers/<key>``.  Committed: exercise 1's
    solution and exercise 2's stub; on disk, exercise 2 solved (uncommitted, not graded)."""
    markers.mkdir()
    sol2 = (MINI / "solutions" / "02_triple" / "triple.py").read_text()
    stub2 = (MINI / "exercises" / "02_triple" / "triple.py").read_text()
    git_fork(path, {"exercises/01_double/double.py": SOL1, "exercises/02_triple/triple.py": stub2,
                    ".gitattributes": "* filter=pwn diff=pwn\n"})

    def mark(key: str) -> str:
        return f"sh -c 'touch {markers}/{key}'"

    script = path / ".git" / "armed.sh"
    script.write_text(f"#!/bin/sh\ntouch {markers}/fsmonitor_or_askpass\nexit 1\n")
    script.chmod(0o755)
    (path / "included.cfg").write_text(f"[filter \"pwn2\"]\n\tclean = {mark('include_path')} && cat\n")
    with open(path / ".git" / "config", "a") as cfg:
        cfg.write(f"""[filter "pwn"]
\tclean = {mark('filter_clean')} && cat {MINI / 'solutions' / '02_triple' / 'triple.py'}
\tsmudge = {mark('filter_smudge')} && cat
\trequired = true
[core]
\tfsmonitor = {script}
\tpager = {mark('core_pager')} && cat
\tsshCommand = {mark('core_sshCommand')} && ssh
\taskPass = {script}
\thooksPath = .git/hooks
[alias]
\tstatus = !{mark('alias_status')}
\tls-tree = !{mark('alias_ls_tree')}
\tcat-file = !{mark('alias_cat_file')}
[diff "pwn"]
\ttextconv = {mark('diff_textconv')} && cat
[include]
\tpath = ../included.cfg
""")
    for hook in ("post-checkout", "pre-commit", "reference-transaction", "post-index-change", "fsmonitor-watchman",
                 "pre-auto-gc", "post-rewrite"):
        (path / ".git" / "hooks" / hook).write_text(f"#!/bin/sh\ntouch {markers}/hook_{hook}\n")
        (path / ".git" / "hooks" / hook).chmod(0o755)
    time.sleep(1.1)  # every tracked file stat-dirty: `git status` would re-read each through the filter
    (path / "exercises" / "02_triple" / "triple.py").write_text(sol2)
    (path / "exercises" / "01_double" / "double.py").touch()
    (path / ".gitattributes").touch()
    return path


def test_14_a_learner_repositorys_config_hooks_and_filters_never_run(course, tmp_path):
    from grader.compare import sources
    from grader.course import batch

    markers = tmp_path / "markers"
    fork = armed_fork(tmp_path / "fork", markers)
    subprocess.run(["git", "-C", str(fork), "status"], capture_output=True)  # the payload is live: git obeys it
    assert (markers / "filter_clean").exists() and (markers / "fsmonitor_or_askpass").exists()
    for m in markers.iterdir():
        m.unlink()
    outcome = ci.run(course, fork, course / "solutions", jobs=1)
    assert [(e.number, e.score, e.max_score) for e in outcome.run.exercises] == [(1, 4, 4), (2, 0, 2)]
    assert any("02_triple/triple.py" in w and "not graded" in w for w in outcome.warnings)
    assert not any("double.py" in w for w in outcome.warnings)  # touched, not changed
    manifest = load(course / "exercises" / "manifest.toml")
    (tmp_path / "gb").mkdir()
    report = batch.run_batch(manifest, batch.locate_all([f"alice={fork}"]), course_root=course,
                             hidden_root=course / "solutions", gradebook=tmp_path / "gb" / "g.sqlite", jobs=1)
    assert sorted((u.exercise.number, r.score) for u, r in report.graded) == [(1, 4), (2, 0)]
    assert batch.uncommitted_changes(report) == {"alice": ["02_triple/triple.py"]}
    # grade compare reads the graded commit from the batch's copy, and a fork given directly by importing it
    ex2 = manifest.get(2)
    (tmp_path / "work").mkdir()
    (sol,) = sources.from_gradebook(tmp_path / "gb" / "g.sqlite", ex2, tmp_path / "work")
    assert sol.code(ex2) == (MINI / "exercises" / "02_triple" / "triple.py").read_text()
    found, problems = sources.from_submissions([str(fork)], ex2, tmp_path / "cache", tmp_path / "work")
    assert not problems and found[0].code(ex2) == sol.code(ex2) and found[0].content_hash == sol.content_hash
    assert sorted(p.name for p in markers.iterdir()) == []


def test_14_a_git_folder_that_is_a_link_or_a_pointer_is_not_followed(course, tmp_path):
    from grader import gitsafe

    real = git_fork(tmp_path / "real", {"exercises/01_double/double.py": SOL1})
    linked = tmp_path / "linked"
    (linked / "exercises" / "01_double").mkdir(parents=True)
    (linked / "exercises" / "01_double" / "double.py").write_text("x = 1\n")
    (linked / ".git").symlink_to(real / ".git")
    pointer = tmp_path / "pointer"
    shutil.copytree(linked / "exercises", pointer / "exercises")
    (pointer / ".git").write_text(f"gitdir: {real / '.git'}\n")
    for folder in (linked, pointer):
        assert gitsafe.find_repository(folder)[0] is None
        outcome = ci.run(course, folder, course / "solutions", numbers=[1], jobs=1)
        assert outcome.run.exercises[0].score == 0  # its files on disk, not the commit it points at
        assert any("does not follow" in w for w in outcome.warnings)


# --- (15) disk ------------------------------------------------------------------------------------------

FILL = """
import os, time
def fill(mb, files=0):
    for i in range(files):
        open(f"empty{i}", "w").close()
    for i in range(mb):
        with open(os.path.join(os.environ["TMPDIR"], f"f{i}.bin"), "wb") as fh:
            fh.write(b"x" * (1 << 20))
        time.sleep(0.005)
    return "wrote it all"
def double(x):
    return 2 * x
"""


@pytest.mark.parametrize("private_fs", [True, False], ids=["tmpfs_when_root", "watchdog"])
@pytest.mark.parametrize("what", ["bytes", "files"])
def test_15_a_sandbox_that_writes_past_its_budget_is_stopped_and_its_disk_freed(tmp_path, private_fs, what):
    from grader.sandbox import disk

    snap = from_source(str(tmp_path / "double.py"), "double.py", FILL.encode())
    with Sandbox(snap, timeout_s=60, disk_mb=8, private_fs=private_fs) as sb:
        assert sb.call("double", 2) == 4
        with pytest.raises(SubmissionError) as err:
            sb.call("fill", *((64,) if what == "bytes" else (0, disk.SANDBOX_DISK_FILES + 10)))
        base = sb._base
        used = disk.usage(base)[0]
    assert err.value.kind == "disk" and "more than 8 MiB" in err.value.message
    assert used < (8 + 4 * 8) << 20  # stopped near the budget (the watchdog looks every 0.1 s)
    assert not base.exists()


def test_15_the_learner_is_told_their_code_wrote_too_much(course, monkeypatch):
    from grader.sandbox import disk

    monkeypatch.setattr(disk, "SANDBOX_DISK_MB", 8)
    ex = grade_source(course, FILL + "fill(64)\n")  # at import: every check's sandbox stops there
    assert ex.score == 0 and not ex.integrity and all(c.status != "integrity" for c in ex.checks)
    ran = [c for c in ex.checks if c.status != "not_run"]
    assert ran and all("wrote more than 8 MiB" in c.message or "more to disk than" in c.message for c in ran)


def test_15_a_fork_is_fetched_within_a_budget_and_a_partial_clone_never_fetches_later(course, tmp_path,
                                                                                      monkeypatch):
    from grader import gitsafe

    src = git_fork(tmp_path / "src", {"exercises/01_double/double.py": SOL1,
                                      "exercises/01_double/table.txt": os.urandom(1 << 20).hex(),
                                      "data/big.txt": os.urandom(3 << 20).hex()})
    subprocess.run(["git", "-C", str(src), "config", "uploadpack.allowFilter", "true"], check=True)
    monkeypatch.setattr(gitsafe, "REMOTE_PROTOCOLS", (*gitsafe.REMOTE_PROTOCOLS, "file"))
    monkeypatch.setattr(gitsafe, "MAX_REPOSITORY_BYTES", 1 << 20)
    with pytest.raises(gitsafe.GitError, match="over 1 MiB"):  # an import: counted as it copies
        gitsafe.import_local(src / ".git", tmp_path / "imported.git")
    monkeypatch.setattr(gitsafe, "MAX_FILE_BYTES", 1 << 20)  # table.txt and big.txt stay on the server...
    store, commit = gitsafe.fetch_remote(f"file://{src}", tmp_path / "clone.git")
    with store:
        ex = load(course / "exercises" / "manifest.toml").get(1)
        snap = read_commit(store, commit, ex.dir, ex.files)
    assert snap.source() == SOL1.encode() and "table.txt" not in snap.files  # ...and are never fetched on demand
    assert any(item.startswith("table.txt") for item in snap.left_out)
    monkeypatch.setattr(gitsafe, "MAX_FILE_BYTES", 8 << 20)
    monkeypatch.setattr(gitsafe, "MAX_REPOSITORY_BYTES", 2 << 20)
    with pytest.raises(gitsafe.GitError, match="over 2 MiB"):  # the whole repository: stopped at the budget
        gitsafe.fetch_remote(f"file://{src}", tmp_path / "clone2.git")
    assert not (tmp_path / "clone2.git").exists() and not (tmp_path / "clone2.git.partial").exists()


# --- (16) result files for the gradebook --------------------------------------------------------------

RESULT_KEY = "the-course-result-key-for-these-tests-0123456789abcdef"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """What `grade ci --json --instructor` wrote for a fork of the mini course (exercise 1
    solved, exercise 2 the stub) with the course's result key set: (course, its JSON)."""
    from click.testing import CliRunner

    from grader import cli

    root = tmp_path_factory.mktemp("graded")
    course = root / "course"
    shutil.copytree(MINI, course)
    fork = root / "fork"
    shutil.copytree(course / "exercises", fork / "exercises")
    (fork / "exercises" / "01_double" / "double.py").write_text(SOL1)
    out = CliRunner().invoke(cli.main, ["ci", "--submission", str(fork), "--hidden", str(course / "solutions"),
                                        "--json", str(root / "r.json"), "--instructor", "-j", "1", "--quiet"],
                             env={"GRADER_COURSE": str(course), "GRADER_RESULT_KEY": RESULT_KEY},
                             catch_exceptions=False)
    assert out.exit_code == 0, out.output
    return course, json.loads((root / "r.json").read_text())


def unsigned(doc: dict) -> dict:
    """What `grade ci` writes where the course keeps no key."""
    return {k: v for k, v in json.loads(json.dumps(doc)).items() if k != "signature"}


def import_results(course: Path, tmp_path: Path, *docs, key: str | None = None):
    """`grade gradebook import` of ``docs`` (objects, or the text of a file) into a new
    gradebook: (exit code, output, gradings recorded)."""
    from click.testing import CliRunner

    from grader import cli
    from grader.course.gradebook import Gradebook

    tmp_path.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, doc in enumerate(docs):
        paths.append(tmp_path / f"result-{i}.json")
        paths[-1].write_text(doc if isinstance(doc, str) else json.dumps(doc))
    book = tmp_path / "grades.sqlite"
    out = CliRunner().invoke(cli.main, ["gradebook", "import", "--gradebook", str(book), *map(str, paths)],
                             env={"GRADER_COURSE": str(course), "GRADER_RESULT_KEY": key})
    count = 0
    if book.exists():
        with Gradebook(book) as gb:
            count = gb.count()
    return out.exit_code, out.output, count


def test_16_results_grade_ci_wrote_are_imported_and_signed_ones_prove_where_they_came_from(graded, tmp_path):
    course, doc = graded
    assert doc["signature"]["alg"] == "hmac-sha256" and len(doc["signature"]["mac"]) == 64
    code, out, count = import_results(course, tmp_path / "a", unsigned(doc))  # no key anywhere: as before
    assert (code, count) == (0, 2), out
    code, out, count = import_results(course, tmp_path / "b", doc, key=RESULT_KEY)
    assert (code, count) == (0, 2), out
    code, out, count = import_results(course, tmp_path / "c", doc)
    assert (code, count) == (0, 2) and "not checked" in out  # signed, but no key here to check it with
    # A result consistent with the manifest but never graded: full marks for the stub of
    # exercise 2.  Nothing in the file can tell -- only the course's key can.
    forged = unsigned(doc)
    triples = forged["exercises"][1]["checks"][0]
    triples.update(status="passed", passed=True, score=2, message="")
    forged["exercises"][1].update(score=2, all_passed=True)
    forged["score"] += 2
    assert import_results(course, tmp_path / "d", forged)[0] == 0
    for bad, key, words in [(forged, RESULT_KEY, "not signed"),
                            ({**forged, "signature": doc["signature"]}, RESULT_KEY, "changed after"),
                            (doc, "another-course's-key", "signed with another key")]:
        code, out, count = import_results(course, tmp_path / words.replace(" ", "_"), doc, bad, key=key)
        assert code == 2 and words in out and count == 0, out


FORGED_RESULTS = {
    # the red team's file (attack 08): 1000 points a check, a check that does not exist, hidden_run forged
    "attack_08": (lambda d: [c.update(status="passed", passed=True, score=1000) for e in d["exercises"]
                             for c in e["checks"]] + [e["checks"].append(
                                 {"name": "bonus_points_from_the_instructor", "visibility": "hidden",
                                  "status": "passed", "passed": True, "score": 500, "max_score": 0, "message": "",
                                  "summary": ""}) for e in d["exercises"]],
                  "'bonus_points_from_the_instructor' is not a check of exercise 1"),
    "score_above_points": (lambda d: d["exercises"][0]["checks"][1].update(score=1000), "all or nothing"),
    "points_not_the_manifests": (lambda d: d["exercises"][1]["checks"][0].update(max_score=5), "it is worth 2"),
    "check_missing": (lambda d: d["exercises"][0]["checks"].pop(), "lacks the check 'compiles_once'"),
    "check_twice": (lambda d: d["exercises"][0]["checks"].append(d["exercises"][0]["checks"][1]), "listed twice"),
    "unknown_exercise": (lambda d: d["exercises"][1].update(number=99), "exercise 99 is not in this course"),
    "another_slug": (lambda d: d["exercises"][1].update(slug="quadruple"), "'triple' in this course's manifest"),
    "exercise_twice": (lambda d: d["exercises"].append(d["exercises"][1]), "exercise 2 is listed twice"),
    "unknown_status": (lambda d: d["exercises"][1]["checks"][0].update(status="excellent"), "is not one"),
    "hidden_checks_without_hidden_run": (lambda d: d["exercises"][0].update(hidden_run=False),
                                         "hidden checks did not run"),
    "blocked_for_nothing": (lambda d: d["exercises"][0]["checks"][2].update(status="blocked", passed=False, score=0),
                            "every check it requires passed"),
    "passed_without_what_it_requires": (
        lambda d: [d["exercises"][0]["checks"][1].update(status="failed", passed=False, score=0),
                   d["exercises"][0]["checks"][2].update(status="passed", passed=True, score=1)],
        "scores only once 'doubles' passes"),
    "integrity_without_a_reason": (
        lambda d: d["exercises"][0]["checks"][2].update(status="integrity", passed=False, score=0),
        "records no integrity violation"),
    "a_violation_that_zeroed_nothing": (lambda d: d["exercises"][0].update(integrity=["walked the gc"]),
                                        "records an integrity violation"),
    "points_after_a_grader_error": (lambda d: d["exercises"][0].update(error="grader error"), "grader failed"),
    "exercise_total": (lambda d: d["exercises"][0].update(score=99), "add up to"),
    "run_total": (lambda d: d.update(score=99), "add up to"),
    "unknown_field": (lambda d: d["exercises"][0]["checks"][0].update(bonus=1), "never writes: 'bonus'"),
    "true_for_a_number": (lambda d: d["exercises"][1]["checks"][0].update(score=False), "should be an integer"),
    "seed_past_64_bits": (lambda d: d["exercises"][0].update(seed=2**70), "within 64 bits"),  # SQLite's limit
    "not_a_number": (lambda d: d["exercises"][0].update(duration_s=math.nan), "not negative, not nan"),
    "text_past_its_cap": (lambda d: d["exercises"][0]["checks"][0].update(message="x" * ((1 << 20) + 1)),
                          "a text of 1048577 characters"),
    "not_a_time": (lambda d: d.update(started_at="yesterday"), "not an ISO 8601 time"),
    "old_format": (lambda d: d.update(format_version=1), "not a grader result of format_version 4"),
    "interrupted": (lambda d: d.update(incomplete=True, score=None), "incomplete"),
    "not_an_object": (lambda d: d["exercises"].insert(0, []), "is a list, not an object"),
    "a_field_missing": (lambda d: d["exercises"][0].pop("checks"), "lacks the field 'checks'"),
}


@pytest.mark.parametrize("forgery", FORGED_RESULTS)
def test_16_a_result_the_grader_would_not_have_written_refuses_the_import(graded, tmp_path, forgery):
    """Checked against the manifest, each forgery is refused with the first problem named,
    and nothing is imported -- not even the genuine file given beside it."""
    course, doc = graded
    bad = unsigned(doc)
    mutate, words = FORGED_RESULTS[forgery]
    mutate(bad)
    code, out, count = import_results(course, tmp_path, unsigned(doc), bad)
    assert code == 2 and words in out and "result-1.json" in out and count == 0, out
    assert "Traceback" not in out


def test_16_a_file_too_deep_or_too_large_to_read_is_refused_cleanly(graded, tmp_path, monkeypatch):
    """100 000 levels of nesting crashed json.loads (RecursionError, a traceback); the
    file's shape is now read before anything is decoded."""
    import dataclasses

    from grader.course import result_file

    course, doc = graded
    code, out, count = import_results(course, tmp_path / "deep", "[" * 100_000 + "]" * 100_000)
    assert code == 2 and "nested more than 8 levels deep" in out and "Traceback" not in out and count == 0
    monkeypatch.setattr(result_file, "FILE_LIMITS", dataclasses.replace(result_file.FILE_LIMITS, max_elements=100))
    code, out, count = import_results(course, tmp_path / "many", unsigned(doc))
    assert code == 2 and "more than 100 values and keys" in out and count == 0
    monkeypatch.setattr(result_file, "FILE_LIMITS", dataclasses.replace(result_file.FILE_LIMITS, max_bytes=1000))
    code, out, count = import_results(course, tmp_path / "long", unsigned(doc))
    assert code == 2 and "over 1000 bytes long" in out and count == 0


# --- (17) answers that cost more to read than to make ---------------------------------------------------

COSTLY = """
import numpy as np
KEYS = {f"{i:x}": 0 for i in range(300_000)}
def double(x):
    return 2 * x
def many_keys():
    return KEYS
def long_list():
    return list(range(300_000))
def nested_lists():
    return [[i] for i in range(200_000)]
def big_array():
    return np.zeros(8 << 20, np.float32)  # 32 MiB: one string, a handful of elements
"""


def test_17_an_answer_of_too_many_values_is_refused_by_the_sandbox_itself(tmp_path):
    snap = from_source(str(tmp_path / "double.py"), "double.py", COSTLY.encode())
    with Sandbox(snap, timeout_s=120) as sb:
        assert sb.call("double", 2) == 4
        for name in ("many_keys", "long_list", "nested_lists"):
            with pytest.raises(SubmissionError) as err:
                sb.call(name)
            assert err.value.kind == "answer_too_large" and "more than 100000 values" in err.value.message
            assert "return a NumPy/JAX array" in err.value.message
        assert sb.call("big_array").shape == (8 << 20,)
        assert sb.call("double", 3) == 6  # refusing an answer costs the sandbox nothing else


def _authentic(sb: Sandbox, rid: int, body: bytes) -> bytes:
    """An answer line as the worker signs it: what a worker whose encoder was bypassed sends."""
    import hashlib
    import hmac

    header = json.dumps({"id": rid, "compiles": 0, "traces": 0, "integrity": []}).encode()
    mac = hmac.new(sb._key, header + b"\n" + body, hashlib.sha256).hexdigest().encode()
    return mac + b" %d " % len(header) + header + body


def test_17_an_answer_past_the_limits_is_refused_before_it_is_decoded():
    """The worker refuses such answers itself; the trusted side does not rely on it: the
    answer's shape is read first, with no recursion and nothing built."""
    from grader.sandbox import client

    limit = client.ANSWER_LIMITS.max_elements
    for body, words in [(b'{"ok":' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested more than"),
                        (b'{"ok":{' + b",".join(b'"%x":0' % i for i in range(limit)) + b"}}", "values and keys")]:
        sb = Sandbox.clean()
        with pytest.raises(SubmissionError) as err:
            sb._decode_answer(_authentic(sb, 1, body), 1)
        assert err.value.kind == "answer_too_large" and words in err.value.message
        assert sb._dead is err.value  # the sandbox is stopped: later calls fail at once
    sb = Sandbox.clean()
    assert sb._decode_answer(_authentic(sb, 1, b'{"ok":[1,2]}'), 1) == {"ok": [1, 2]}


def test_17_reading_answers_back_counts_against_the_exercises_budget(tmp_path, monkeypatch):
    """Time the trusted side spends decoding and rebuilding an answer is the exercise's,
    like time spent waiting for it (it was free: a 90 s exercise took 264 s)."""
    from grader import plaindata

    rebuild = plaindata.from_plain

    def slow(value, *args, **kwargs):
        time.sleep(3.0)
        return rebuild(value, *args, **kwargs)

    snap = from_source(str(tmp_path / "double.py"), "double.py", SOL1.encode())
    with Sandbox(snap, timeout_s=120) as sb:
        assert sb.call("double", 2) == 4
        sb.timeout_s = sb.busy_s + 2.0  # 2 s left: the call's answer takes 3 s to rebuild
        monkeypatch.setattr(plaindata, "from_plain", slow)
        with pytest.raises(SubmissionError) as err:
            sb.call("double", 3)
        assert sb.decode_s >= 3.0
    assert err.value.kind == "timeout" and "s reading back what your functions returned" in err.value.message


def test_17_the_learner_is_told_to_return_an_array(course):
    src = "KEYS = {str(i): 0 for i in range(300_000)}\n\ndef double(x):\n    return KEYS\n"
    t0 = time.monotonic()
    ex = grade_source(course, src)
    assert ex.score == 0 and time.monotonic() - t0 < 120
    checks = {c.name: c for c in ex.checks}
    assert "more than 100000 values" in checks["doubles_public"].message
    assert checks["doubles"].message.startswith("your function returned more than the grader reads back")
    assert "return a NumPy/JAX array" in checks["doubles"].hint
