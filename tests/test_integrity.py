"""Verdicts a course can trust: each way a fork could earn, read or break what it must not,
tried for real (as root where the attack needs it, as on CI runners and Gradescope).

The numbers in the test names follow the holes found when the grader was attacked:
(1) links to the course's files, (2) the course's checkout and environment, (3) planting
code where a worker starts, (4, 6) the compile cache, (5) a named sandbox account,
(7) forging measurements inside the learner's own process, (8) hidden inputs leaking into
public messages, (9) interrupts, (10) an open sandbox, (11) stalling or crashing the
trusted side, (12) leftovers.
"""

from __future__ import annotations

import json
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

FORGERIES = {
    "gc": "import gc\n_ = gc.get_objects()\n",
    "frames": "import inspect\n_ = inspect.stack()\n",
    "traceback_frames": ("import traceback\ntry:\n    1 / 0\nexcept ZeroDivisionError as e:\n"
                         "    _ = [f for f, _ in traceback.walk_tb(e.__traceback__)]\n"),
    "grader_walker": "import importlib\nimportlib.import_module('grader.ir')\n",
    "answer_pipe": "import os\nos.write(1001, b'{\"id\": 2, \"ok\": 4}\\n')\n",
    "code_spoof": "import jax\nexec(compile('def f(x): return x', jax.__file__, 'exec'), {})\n",
    # the grader's true source, read the way tracebacks read it, run under its own name
    "grader_source": ("import linecache, os, sys\n"
                      "root = next(p for p in sys.path if os.path.isfile(os.path.join(p, 'grader', 'compiles.py')))\n"
                      "path = os.path.join(root, 'grader', 'compiles.py')\n"
                      "exec(compile(''.join(linecache.getlines(path)), path, 'exec'), {'__name__': 'x'})\n"),
}


@pytest.mark.parametrize("trick", sorted(FORGERIES))
def test_7_tampering_is_refused_recorded_and_zeroes_the_measured_checks(course, trick):
    body = "".join("    " + line + "\n" for line in FORGERIES[trick].splitlines())
    source = SOL1 + "\n\n_seen = []\n\ndef touch():\n" + body + "\n\n" + (
        "def _wrap():\n    inner = double\n    def double_(x):\n        if not _seen:\n            _seen.append(1)\n"
        "            try:\n                touch()\n            except Exception:\n                pass\n"
        "        return inner(x)\n    return double_\n\n\ndouble = _wrap()\n")
    ex = grade_source(course, source)
    by = {c.name: c for c in ex.checks}
    assert ex.integrity, f"{trick}: nothing was recorded"
    assert by["compiles_once"].status == "integrity" and by["compiles_once"].score == 0
    assert by["doubles"].passed and by["doubles"].score == 3  # not measured: its verdict rests on values alone
    assert "integrity" in json.dumps(ex.to_dict())


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
        _, compiles = count_compiles(sb, "double", calls)
    assert compiles.learner == 3  # three fresh functions, three compilations: all the learner's


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
