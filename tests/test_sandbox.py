"""The sandbox: every way learner code can fail becomes a SubmissionError with a clear message."""

import os
import time
from pathlib import Path

import numpy as np
import pytest

from grader.sandbox import user as sandbox_user
from grader.sandbox.client import Sandbox, SubmissionError
from grader.testing import count_compiles


def sandbox_for(tmp_path, source, **kw):
    path = tmp_path / "learner.py"
    path.write_text(source)
    kw.setdefault("timeout_s", 20)
    return Sandbox(path, **kw)


def error_of(sb, name="f", *args):
    with pytest.raises(SubmissionError) as info:
        sb.call(name, *args)
    return info.value


def test_calls_return_trusted_numpy(tmp_path):
    with sandbox_for(tmp_path, "import jax.numpy as jnp\ndef f(x):\n    return {'y': jnp.sin(x), 'n': 3}\n") as sb:
        out = sb.call("f", np.zeros(3, np.float32))
    assert type(out["y"]) is np.ndarray and out["y"].shape == (3,) and out["n"] == 3


def test_syntax_error_names_file_and_line(tmp_path):
    with sandbox_for(tmp_path, "def f(x):\n    return x +\n") as sb:
        err = error_of(sb)
    assert err.kind == "syntax_error"
    assert "learner.py:2" in err.message


def test_not_implemented(tmp_path):
    with sandbox_for(tmp_path, "def f():\n    raise NotImplementedError\n") as sb:
        err = error_of(sb)
    assert err.kind == "not_implemented" and "not implemented" in err.message


def test_missing_function(tmp_path):
    with sandbox_for(tmp_path, "def g():\n    return 1\n") as sb:
        err = error_of(sb)
    assert err.kind == "missing_function" and "`f` is not defined" in err.message


def test_exception_keeps_only_learner_frames(tmp_path):
    with sandbox_for(tmp_path, "def f():\n    return 1 / 0\n") as sb:
        err = error_of(sb)
    assert err.kind == "exception" and "ZeroDivisionError" in err.message
    assert "learner.py" in err.detail and "worker.py" not in err.detail


def test_an_error_inside_jit_is_the_learners_error_not_an_integrity_violation(tmp_path):
    # JAX reads the source line of every frame on the stack (grader frames included) when an
    # error passes through jit: showing lines is not reading the grader.
    src = ("import jax, jax.numpy as jnp\n\n@jax.jit\ndef f(x):\n"
           "    return jnp.dot(x, jnp.ones((7, 3)))\n")
    with sandbox_for(tmp_path, src) as sb:
        err = error_of(sb, "f", np.ones((2, 3), np.float32))
        assert sb.integrity == []
    assert err.kind == "exception" and "dot_general" in err.message
    assert f'File "{tmp_path / "learner.py"}", line 5' in err.detail


def test_scanning_the_import_path_is_not_an_integrity_violation(tmp_path):
    # importlib.metadata (SciPy's import, jax.export's first call) lists every folder on
    # sys.path, the grader's copy included: names of public files, not a read of them
    src = "import importlib.metadata\ndef f():\n    return len(list(importlib.metadata.distributions()))\n"
    with sandbox_for(tmp_path, src) as sb:
        assert sb.call("f") > 0
        assert sb.integrity == []


def test_the_libraries_a_course_uses_import_without_tripping_the_guard(tmp_path):
    # equinox imports jaxtyping -> unittest.mock -> asyncio (which makes coroutine code
    # objects at import) and tries optional imports that scan sys.path
    src = ("import asyncio, equinox as eqx, optax, jax, jax.numpy as jnp\n"
           "def f():\n    m = eqx.nn.Linear(2, 3, key=jax.random.key(0))\n"
           "    return float(jnp.sum(m(jnp.ones(2)))) + len(optax.adam(0.1).init(m.weight))\n")
    with sandbox_for(tmp_path, src, timeout_s=60) as sb:
        assert isinstance(sb.call("f"), float)
        assert sb.integrity == []


def test_jax_profiler_trace_works_and_nothing_is_refused(tmp_path):
    # its C++ session sets a profiling hook on every thread, the trusted one included: not the learner's
    src = ("import os, tempfile, jax, jax.numpy as jnp\nX = jax.device_put(jnp.arange(8.0))\n"
           "def f():\n    where = os.path.join(tempfile.gettempdir(), 'trace')\n"
           "    with jax.profiler.trace(where):\n        jax.block_until_ready(X * 2)\n"
           "    return sorted(os.listdir(where))\n")
    with sandbox_for(tmp_path, src, timeout_s=60) as sb:
        assert sb.call("f") == ["plugins"]
        assert sb.integrity == [] and sb.refusals == []
    assert "PyEval_SetProfile" not in sb.output


def test_timeout_kills_and_later_calls_fail_fast(tmp_path):
    with sandbox_for(tmp_path, "def f():\n    while True:\n        pass\n", timeout_s=2) as sb:
        t0 = time.monotonic()
        err = error_of(sb)
        assert err.kind == "timeout" and "ran out of time" in err.message
        assert time.monotonic() - t0 < 10
        assert error_of(sb).kind == "timeout"


def test_exit_on_import_is_a_crash_not_a_success(tmp_path):
    with sandbox_for(tmp_path, "import os\nos._exit(0)\n") as sb:
        err = error_of(sb)
    assert err.kind == "crashed" and "status 0" in err.message


def test_sys_exit_is_reported(tmp_path):
    with sandbox_for(tmp_path, "import sys\ndef f():\n    sys.exit(0)\n") as sb:
        assert error_of(sb).kind == "exit"
        assert sb.call.__self__ is sb  # the sandbox is still usable after a caught exit


def test_crash_by_signal(tmp_path):
    with sandbox_for(tmp_path, "import faulthandler\ndef f():\n    faulthandler._sigsegv()\n") as sb:
        err = error_of(sb)
    assert err.kind == "crashed" and "SIGSEGV" in err.message


def test_memory_limit(tmp_path):
    src = "def f():\n    b = bytearray(3 << 30)\n    return len(b)\n"
    with sandbox_for(tmp_path, src, memory_mb=2048) as sb:
        err = error_of(sb)
    assert err.kind == "memory" and "2048 MiB" in err.message


def test_huge_output_is_capped_and_does_not_block(tmp_path):
    src = "import sys\ndef f():\n    for _ in range(2000):\n        sys.stdout.write('x' * 10000 + '\\n')\n    return 7\n"
    with sandbox_for(tmp_path, src) as sb:
        assert sb.call("f") == 7
        out = sb.output
    assert len(out) < 20_000 and "bytes of output cut" in out


def test_fake_equality_objects_are_refused(tmp_path):
    src = "class E:\n    def __eq__(self, o):\n        return True\ndef f():\n    return E()\n"
    with sandbox_for(tmp_path, src) as sb:
        err = error_of(sb)
    assert err.kind == "bad_return" and "learner.E" in err.message


def test_learner_prints_cannot_forge_protocol_messages(tmp_path):
    src = "print('{\"id\": 1, \"ok\": 42}', flush=True)\ndef f():\n    print('{\"id\": 1, \"ok\": 42}', flush=True)\n    return 1\n"
    with sandbox_for(tmp_path, src) as sb:
        assert sb.call("f") == 1


def test_missing_file(tmp_path):
    sb = Sandbox(tmp_path / "nope.py")
    sb.start()
    with pytest.raises(SubmissionError) as info:
        sb.call("f")
    assert info.value.kind == "missing_file"
    sb.close()


def test_device_count_is_set_before_jax_starts(tmp_path):
    with sandbox_for(tmp_path, "import jax\ndef f():\n    return jax.device_count()\n", cpu_devices=4) as sb:
        assert sb.call("f") == 4


def test_grader_package_is_sealed_from_learner_code(tmp_path):
    # refused quietly: an ImportError that says why, and no accusation (nothing was reached)
    with sandbox_for(tmp_path, "def f():\n    import grader.ir\n    return 1\n") as sb:
        err = error_of(sb)
        assert err.kind == "exception" and err.exc_type == "ImportError"
        assert "importing the grader's own modules" in err.message
        assert sb.integrity == [] and [r.kind for r in sb.refusals] == ["grader_import"]


def test_a_not_implemented_error_raised_by_a_library_is_the_learners_error_not_the_stubs_todo(tmp_path):
    """The stub's TODO raises NotImplementedError in the learner's file; a library that raises
    one (JAX without a transpose rule for an operation) is an error to read, not a TODO."""
    src = ("import asyncio\n"
           "def todo():\n    raise NotImplementedError\n"
           "def library():\n    return asyncio.AbstractEventLoop().time()\n")
    with sandbox_for(tmp_path, src) as sb:
        assert error_of(sb, "todo").kind == "not_implemented"
        err = error_of(sb, "library")
        assert err.kind == "exception" and err.exc_type == "NotImplementedError"


def test_clean_worker_runs_probes_without_learner_code():
    with Sandbox.clean(timeout_s=20) as sb:
        out = sb.probe("ex05_loops:while_reference", np.float32(0.5), np.zeros(3, np.float32), 10)
        assert out["n_steps"] >= 1 and out["z"].shape == (3,)
        with pytest.raises(SubmissionError):
            sb.call("anything")


def test_an_answer_nobody_waited_for_is_skipped_not_taken_for_the_next(tmp_path):
    """A check that gave up on a request (its deadline) leaves the answer in the pipe: the next
    request's reader skips it (authentic, older) instead of calling the sandbox out of turn --
    the reference solution's sandbox, paired with the learner's, relies on it."""
    with sandbox_for(tmp_path, "def f(x):\n    return x * 2\n") as sb:
        sb.submit("call", "f", 1)
        assert sb.result(sb.submit("call", "f", 5)) == 10 and not sb.integrity


NO_JAX_FILE = """
import glob, importlib.util, os, queue, sys, threading
from functools import partial
import numpy as np
import jax
import jax.numpy as jnp

@partial(jax.jit, static_argnums=0)   # module-level use of JAX: stand-ins, no error
def helper(n):
    return n

ITEM = {"float32": np.dtype("float32").itemsize}

def formula(m, k, n):
    return {"flops": 2.0 * m * k * n, "bytes": float(ITEM["float32"] * (m * k + k * n + m * n))}

def uses_jnp(m):
    return float(jnp.ones(m).sum())

def returns_jax(m):
    return {"flops": jnp.dot(m, m)}

def brings_jax_back(m):
    for name in [n for n in sys.modules if n.partition(".")[0] in ("jax", "jaxlib")]:
        del sys.modules[name]
    sys.meta_path.pop(0)
    import jax as real
    return float(real.numpy.ones(m).sum())

def loads_jaxlib_by_path(m):
    folder = os.path.dirname(importlib.util.find_spec("jaxlib").origin or "")
    so = (glob.glob(os.path.join(folder, "_jax*.so")) or [folder + "/_jax.so"])[0]
    importlib.util.module_from_spec(importlib.util.spec_from_file_location("jaxlib._jax", so))
    return 1.0

_asks, _answers = queue.Queue(), queue.Queue()

def _worker():
    while True:
        m = _asks.get()
        try:
            _answers.put(float(jnp.ones(m).sum()))
        except Exception as exc:
            _answers.put(exc)

threading.Thread(target=_worker, daemon=True).start()

def in_a_thread(m):
    _asks.put(m)
    got = _answers.get(timeout=10)
    if isinstance(got, Exception):
        raise got
    return got
"""


def test_a_worker_without_jax_runs_formulas_and_nothing_of_jax(tmp_path):
    """``Sandbox(..., jax=False)``: the learner's file imports (JAX stands in at module
    level), a formula answers, and every way of reaching JAX -- jnp, a returned stand-in,
    the real package re-imported, jaxlib's native library loaded by path, a thread -- fails;
    the back doors are refused (quietly: a prediction that needs JAX fails, nobody is accused)."""
    with sandbox_for(tmp_path, NO_JAX_FILE, jax=False) as sb:
        assert sb.call("formula", 2, 3, 4) == {"flops": 48.0, "bytes": 104.0}
        assert sb.last_meter == {"compiles": 0, "traces": 0}
        assert error_of(sb, "uses_jnp", 3).exc_type == "JAXNotAvailable"
        assert error_of(sb, "in_a_thread", 3).exc_type == "JAXNotAvailable"
        assert "nojax.Absent" in error_of(sb, "returns_jax", 3).message
        for back_door in ("brings_jax_back", "loads_jaxlib_by_path"):
            err = error_of(sb, back_door, 3)
            assert err.exc_type == "ImportError" and "where JAX must not run" in err.message
        # refused quietly: reaching for JAX here fails the prediction, it attacks nothing
        assert any(r.kind == "no_jax" for r in sb.refusals) and not sb.integrity
        with pytest.raises(SubmissionError):
            sb.probe("generic:jaxpr_of", "formula", [2, 3, 4])  # no probes here: they are JAX


def test_compile_counts_are_the_same_with_a_warm_compile_cache(tmp_path, open_tmp, monkeypatch):
    # as a learner's laptop runs it: one user (as root, sandboxes share no cache; see below)
    monkeypatch.setattr(sandbox_user, "isolating", lambda: False)
    cache = open_tmp / "cache"
    cache.mkdir()
    os.chmod(cache, 0o777)
    # (the learner turns JAX's compile log on: its lines are theirs, the cache's are not)
    src = "import jax\njax.config.update('jax_log_compiles', True)\n@jax.jit\ndef f(x):\n    return x * 2\n"
    calls = [{"args": [np.zeros(n, np.float32)]} for n in (3, 3, 4)]
    counts, entries = [], []
    for _ in range(2):  # the second sandbox finds both programs in the persistent cache
        with sandbox_for(tmp_path, src, compile_cache=cache) as sb:
            counts.append(count_compiles(sb, None, "f", calls)[1].attributed)
            assert not sb.integrity
        assert "persistent compilation cache" not in sb.output.lower()  # complete once the worker ended
        entries.append(sorted(p.name for p in cache.rglob("*") if p.is_file() and p.name[0] != "."))
    assert counts == [2, 2]
    assert entries[0], "the persistent cache was not written"
    assert entries[1] == entries[0], "the second run should have hit the cache, not written new entries"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs learner code as a user of its own")
def test_as_root_sandboxes_share_no_compile_cache(tmp_path, open_tmp):
    cache = open_tmp / "cache"
    cache.mkdir()
    os.chmod(cache, 0o777)
    with sandbox_for(tmp_path, "import jax\n@jax.jit\ndef f(x):\n    return x * 2\n", compile_cache=cache) as sb:
        assert count_compiles(sb, None, "f", [{"args": [np.zeros(3, np.float32)]}])[1].attributed == 1
    assert not any(cache.iterdir()) and "persistent" not in sb.output.lower()


@pytest.fixture
def open_tmp():
    """A temporary folder any user may enter (pytest's own is private to its user)."""
    import shutil
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="grader-test-"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


PEEK = """
import os

def peek(paths):
    out = {"uid": os.getuid(), "euid": os.geteuid()}
    for p in paths:
        try:
            with open(p, "rb") as f:
                f.read(1)
            out[p] = "read"
        except OSError as exc:
            out[p] = type(exc).__name__
    return out

def boom():
    raise ValueError("where am I")
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox changes user only when the grader runs as root")
def test_as_root_learner_code_runs_unprivileged_and_cannot_read_the_course_secrets(open_tmp):
    tmp_path = open_tmp
    course = tmp_path / "course"
    secrets = [course / "solutions" / "01_x" / "x.py", course / "solutions" / "01_x" / "test_hidden.py",
               course / "fixtures" / "01_x" / "wrong" / "x.py"]
    for p in secrets:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("SECRET = 1\n")
    for d in [tmp_path, course, *course.rglob("*")]:
        os.chmod(d, 0o755 if d.is_dir() else 0o644)  # as a git checkout leaves them
    assert all(sandbox_user.readable_by_others(p) for p in secrets)
    assert set(sandbox_user.protect([course / "solutions", course / "fixtures"])) == {
        course / "solutions", course / "fixtures"}
    assert not any(sandbox_user.readable_by_others(p) for p in secrets)
    # the learner's own checkout may sit anywhere, even where the sandbox user cannot look
    learner = tmp_path / "private" / "learner.py"
    learner.parent.mkdir()
    os.chmod(learner.parent, 0o700)
    learner.write_text(PEEK)
    with Sandbox(learner, timeout_s=20) as sb:
        seen = sb.call("peek", [str(p) for p in secrets])
        err = error_of(sb, "boom")
    assert seen["uid"] != 0 and seen["euid"] != 0
    assert {seen[str(p)] for p in secrets} == {"PermissionError"}
    assert str(learner) in err.detail and "grade-sandbox-" not in err.detail  # their path, not the copy's


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox changes user only when the grader runs as root")
def test_as_root_a_private_tmpdir_still_gives_sandboxes_their_files(tmp_path, monkeypatch):
    """TMPDIR inside a folder only root may enter (pytest's own, a home): the sandbox's user
    could not reach the grader's code or its own folder there, so those go to /tmp."""
    import tempfile

    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    assert sandbox_user.temp_root() == "/tmp"
    learner = private / "learner.py"
    learner.write_text(PEEK)
    with Sandbox(learner, timeout_s=20) as sb:
        seen = sb.call("peek", [])
    assert seen["uid"] != 0
    monkeypatch.setenv("TMPDIR", "/tmp")
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert sandbox_user.temp_root() is None


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox changes user only when the grader runs as root")
def test_as_root_a_grading_closes_the_solutions_folder(open_tmp):
    import shutil

    from grader import runner
    from grader.manifest import load

    course = open_tmp / "course"
    shutil.copytree(Path(__file__).parent / "minicourse", course)
    os.chmod(course, 0o755)
    os.chmod(course / "solutions", 0o755)
    assert sandbox_user.readable_by_others(course / "solutions" / "02_triple" / "test_hidden.py")
    runner.grade(load(course / "exercises" / "manifest.toml"), [2], course_root=course,
                 hidden_root=course / "solutions")
    assert not sandbox_user.readable_by_others(course / "solutions" / "02_triple" / "test_hidden.py")


def test_sandbox_users_are_unique_and_never_root(monkeypatch):
    if os.geteuid() != 0:
        assert sandbox_user.sandbox_user() is None  # nobody to switch to
        return
    users = [sandbox_user.sandbox_user() for _ in range(3)]
    assert len({u.uid for u in users}) == 3 and all(u.uid >= sandbox_user.UID_BASE for u in users)
    for u in users:
        sandbox_user.release(u)
    # a uid still held is skipped when the counter comes round again (a long batch): closing the
    # later sandbox ends every process of its uid, which must never be the open one's
    monkeypatch.setattr(sandbox_user, "end_everything_of", lambda user: None)  # no processes to end here
    held = sandbox_user.sandbox_user()
    later = [sandbox_user.sandbox_user() for _ in range(sandbox_user.SLOTS - 1)]
    assert held.uid not in {u.uid for u in later}
    for u in later:
        sandbox_user.release(u)
    again = sandbox_user.sandbox_user()
    assert again.uid != held.uid
    for u in (held, again):
        sandbox_user.release(u)
    monkeypatch.setenv("GRADER_SANDBOX_USER", "nobody")
    assert sandbox_user.sandbox_user().name == "nobody"
    monkeypatch.setenv("GRADER_SANDBOX_USER", "root")
    with pytest.raises(ValueError, match="is root"):
        sandbox_user.sandbox_user()
    monkeypatch.setenv("GRADER_SANDBOX_USER", "no-such-user-here")
    with pytest.raises(ValueError, match="not a user"):
        sandbox_user.sandbox_user()


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox changes user only when the grader runs as root")
def test_as_root_two_sandboxes_cannot_touch_each_other(tmp_path):
    src = ("import os, signal\ndef me():\n    return [os.getpid(), os.getuid(), os.getcwd()]\n"
           "def attack(pid, cwd):\n    out = []\n    try:\n        os.kill(pid, signal.SIGKILL)\n        out.append('killed')\n"
           "    except OSError as exc:\n        out.append(type(exc).__name__)\n    try:\n"
           "        open(os.path.join(cwd, 'planted.txt'), 'w').write('x')\n        out.append('wrote')\n"
           "    except OSError as exc:\n        out.append(type(exc).__name__)\n    return out\n")
    with sandbox_for(tmp_path, src) as victim, sandbox_for(tmp_path, src) as attacker:
        pid, uid, cwd = victim.call("me")
        assert attacker.call("me")[1] != uid
        assert attacker.call("attack", pid, cwd) == ["PermissionError", "PermissionError"]
        assert victim.call("me")[0] == pid  # still alive



@pytest.fixture(scope="module")
def zygote():
    from grader.sandbox.client import Zygote

    with Zygote() as z:
        yield z


def test_zygote_workers_are_fresh_isolated_workers(tmp_path, zygote):
    src = ("import os, jax\nprint('hi')\n@jax.jit\ndef f(x):\n    return x * 2\n"
           "def info():\n    return {'devices': len(jax.devices()), 'uid': os.getuid()}\n")
    calls = [{"args": [np.zeros(n, np.float32)]} for n in (3, 3, 4)]
    seen = []
    for devices in (8, 2):  # each child gets its own device count and empty caches
        with sandbox_for(tmp_path, src, zygote=zygote, cpu_devices=devices) as sb:
            counts = count_compiles(sb, None, "f", calls)[1].attributed
            seen.append((counts, sb.call("info")["devices"], sb.call("info")["uid"] != 0 or os.geteuid() != 0))
            assert sb.output == "hi\n"
            assert isinstance(sb.proc, object) and sb.proc.pid != zygote.proc.pid
    assert seen == [(2, 8, True), (2, 2, True)]


@pytest.mark.parametrize("with_zygote", [True, False])
def test_a_worker_starts_with_its_imports_out_of_the_collectors_sight(tmp_path, zygote, with_zygote):
    """``worker.freeze_imports``: the imports (JAX's objects) sit in the permanent generation,
    so the worker's collections never walk them; what the learner's code makes is collected."""
    src = ("import gc\nclass Cycle:\n    pass\n"
           "def f():\n    a = Cycle(); a.me = a; del a\n    return [gc.get_freeze_count(), gc.collect()]\n")
    with sandbox_for(tmp_path, src, zygote=zygote if with_zygote else None) as sb:
        frozen, collected = sb.call("f")
    assert frozen > 100_000 and collected >= 1


def test_zygote_workers_report_crashes_timeouts_and_learner_failures(tmp_path, zygote):
    with sandbox_for(tmp_path, "import os\ndef f():\n    os._exit(7)\n", zygote=zygote) as sb:
        err = error_of(sb)
    assert err.kind == "crashed" and "status 7" in err.message
    with sandbox_for(tmp_path, "def f():\n    while True:\n        pass\n", zygote=zygote, timeout_s=1) as sb:
        assert error_of(sb).kind == "timeout"
    with sandbox_for(tmp_path, "def f(:\n", zygote=zygote) as sb:
        assert error_of(sb).kind == "syntax_error"
    with sandbox_for(tmp_path, "import sys\nsys.stdin.read()\ndef f():\n    return 1\n", zygote=zygote) as sb:
        assert sb.call("f") == 1  # stdin is /dev/null, not the zygote's request pipe


LAST_PID = Path("/proc/sys/kernel/ns_last_pid")


def test_a_pid_the_kernel_hands_on_to_the_next_worker_confuses_neither(tmp_path, zygote):
    """A long grading (batch, verify) goes through every pid the machine has: the zygote
    reaps a worker, the kernel gives its pid to a later worker.  The later one must not
    look dead (the earlier one's exit status), and signals for the earlier one must not
    reach it.  The kernel is asked for the same pid again through ``ns_last_pid`` (root)."""
    if os.geteuid() != 0 or not os.access(LAST_PID, os.W_OK):
        pytest.skip("needs root and a writable /proc/sys/kernel/ns_last_pid to hand a pid on")
    for _ in range(20):
        with sandbox_for(tmp_path, "def f():\n    return 1\n", zygote=zygote) as first:
            assert first.call("f") == 1
            pid = first.proc.pid
            first.kill()
            first.proc.wait()
        try:
            LAST_PID.write_text(str(pid - 1))
        except OSError:  # root in a container without CAP_SYS_ADMIN over its pid namespace
            pytest.skip("cannot write /proc/sys/kernel/ns_last_pid here")
        with sandbox_for(tmp_path, "def f():\n    return 2\n", zygote=zygote) as second:
            second.start()
            if second.proc.pid != pid:
                continue  # another process took the pid first: try again
            zygote.signal(first.proc.rid, 9, group=True)  # a late kill of the first worker: long gone
            time.sleep(0.5)
            assert second.proc.poll() is None
            assert second.call("f") == 2
            return
    pytest.skip("the kernel never handed the same pid on (a busy machine)")


def test_a_dead_zygote_falls_back_to_a_fresh_worker(tmp_path):
    from grader.sandbox.client import Zygote

    z = Zygote().start()
    z.close()
    with sandbox_for(tmp_path, "def f():\n    return 5\n", zygote=z) as sb:
        assert sb.call("f") == 5 and isinstance(sb.proc, __import__("subprocess").Popen)


@pytest.mark.parametrize("via_zygote", [False, True])
def test_workers_die_with_a_killed_grader(tmp_path, via_zygote):
    import signal
    import subprocess
    import sys

    learner = tmp_path / "learner.py"
    learner.write_text("def spin():\n    while True:\n        pass\n")
    script = (
        "import sys\nfrom grader.sandbox.client import Sandbox, Zygote\n"
        f"z = Zygote().start() if {via_zygote} else None\n"
        f"sb = Sandbox({str(learner)!r}, timeout_s=600, zygote=z).start()\n"
        "sb.begin_import()\nprint(sb.proc.pid, flush=True)\nsb.call('spin')\n"
    )
    grader_proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                                   start_new_session=True)
    worker_pid = int(grader_proc.stdout.readline())
    deadline = time.monotonic() + 20
    stat = Path(f"/proc/{worker_pid}/stat")
    while time.monotonic() < deadline and int(stat.read_text().rsplit(")", 1)[1].split()[11]) < 100:
        time.sleep(0.1)  # until the worker has spent 1 s of CPU (utime, in ticks): it is spinning
    os.killpg(grader_proc.pid, signal.SIGKILL)  # the grader (and, with a zygote, the zygote's group too)
    grader_proc.wait()
    grader_proc.stdout.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(worker_pid, 0)
        except ProcessLookupError:
            return
        if Path(f"/proc/{worker_pid}/stat").read_text().split()[2] == "Z":
            return  # ended, waiting for its (dead) parent's reaper
        time.sleep(0.1)
    os.kill(worker_pid, 9)
    pytest.fail("the worker outlived the grader that started it")


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox changes user only when the grader runs as root")
def test_as_root_lazy_imports_work_from_a_closed_installation_and_reach_nothing_else(open_tmp):
    """The venv may sit in a closed checkout (as CI's does): modules JAX imports only later,
    after the drop, still load through the held folders; a secret beside them does not."""
    closed = open_tmp / "closed"
    closed.mkdir()
    (closed / "secret.txt").write_text("hidden\n")
    os.chmod(closed, 0o700)
    src = (f"import sys\ndef f():\n    import fractions, jax.experimental.checkify\n"
           f"    try:\n        open({str(closed / 'secret.txt')!r}).read()\n        return 'read'\n"
           f"    except OSError as exc:\n        return type(exc).__name__\n")
    with sandbox_for(open_tmp, src) as sb:
        assert sb.call("f") == "PermissionError"


def test_no_process_can_be_started_even_through_functions_the_audit_hook_cannot_see(tmp_path):
    src = ("import os, subprocess, _posixsubprocess\n"
           "def attempts():\n    out = {}\n"
           "    try:\n        subprocess.Popen(['sleep', '300'], start_new_session=True)\n        out['popen'] = 'started'\n"
           "    except OSError as exc:\n        out['popen'] = type(exc).__name__\n"
           "    r, w = os.pipe()\n"
           "    try:\n        pid = _posixsubprocess.fork_exec([b'/bin/sleep', b'300'], [b'/bin/sleep'], True, (), None, None,"
           " -1, -1, -1, -1, -1, -1, r, w, True, True, -1, None, None, None, -1, None, False)\n"
           "        out['fork_exec'] = pid\n"
           "    except OSError as exc:\n        out['fork_exec'] = exc.errno\n"
           "    return out\n")
    with sandbox_for(tmp_path, src) as sb:
        got = sb.call("attempts")
        assert got["popen"] == "PermissionError" and [r.kind for r in sb.refusals] == ["process"]
        assert sb.integrity == []  # refused quietly: isolation (below) is what stops it
    import errno

    assert got["fork_exec"] == errno.EPERM  # the seccomp filter: the kernel says no


def test_a_killed_graders_folders_are_removed_by_the_next_grading(tmp_path, monkeypatch):
    """SIGKILL leaves a grader no time to clean up: the next one removes what it left --
    only real folders of a finished process of its own user, never a link or a live one's."""
    import subprocess
    import sys
    import tempfile

    from grader.sandbox import scratch

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    script = ("import os\nfrom grader.sandbox import install, scratch\n"
              "print(install.grader_base(), scratch.make('sandbox'), scratch.make('checks'), flush=True)\n"
              "os.kill(os.getpid(), 9)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ))
    assert proc.returncode == -9
    left = [Path(p) for p in proc.stdout.split()]
    assert len(left) == 3 and all(p.is_dir() for p in left)
    dead = left[1].name.split("-")[3]
    target = tmp_path / "not-the-graders"
    target.mkdir()
    (target / "keep").write_text("")
    link = tmp_path / f"grade-sandbox-{scratch._NAMESPACE}-{dead}-link"
    link.symlink_to(target)
    live = scratch.make("checks")  # this process's: alive
    monkeypatch.setattr(scratch, "_swept", False)
    removed = scratch.sweep()
    assert set(left) <= set(removed) and not any(p.exists() for p in left)
    assert link.is_symlink() and (target / "keep").exists() and live.is_dir()
    assert scratch.sweep() == []  # once per process
    live.rmdir()


@pytest.mark.parametrize("via_zygote", [False, True])
def test_a_closed_sandbox_knows_the_cpu_its_worker_used(tmp_path, zygote, via_zygote):
    """``grade exercise -v`` and ``grade verify`` say where a grading's time went."""
    src = "import time\ndef spin(s):\n    end = time.process_time() + s\n    while time.process_time() < end:\n        pass\n"
    with sandbox_for(tmp_path, src, zygote=zygote if via_zygote else None) as sb:
        sb.call("spin", 0.6)
    assert sb.cpu_s >= 0.6 and sb.wall_s >= 0.6


def test_the_graders_copy_imports_compiled_modules_and_never_a_stale_one(tmp_path):
    """Workers write no bytecode, so the copy they import from carries the checkout's own
    compiled modules: a zygote then loads them instead of compiling the grader's source.  A
    compiled module that no longer matches its source is not carried over as valid."""
    import importlib.util
    import py_compile
    import subprocess
    import sys

    from grader.sandbox import install

    fresh = Path(install.__file__).with_name("scratch.py")  # compiled now: current
    stale = Path(install.__file__).with_name("disk.py")
    py_compile.compile(str(fresh), doraise=True)
    cached = Path(importlib.util.cache_from_source(str(stale)))
    py_compile.compile(str(stale), doraise=True)
    data = bytearray(cached.read_bytes())
    data[8:12] = (int.from_bytes(data[8:12], "little") - 7).to_bytes(4, "little")  # as if the source changed since
    cached.write_bytes(bytes(data))
    try:
        script = ("from grader.sandbox import install\nprint(install.grader_base(), flush=True)\n"
                  "import subprocess, sys\n"
                  "base = str(install.grader_base())\n"
                  "code = f'import sys; sys.path.insert(0, {base!r}); import grader.sandbox.scratch, grader.sandbox.disk'\n"
                  "p = subprocess.run([sys.executable, '-v', '-s', '-P', '-c', code], capture_output=True, text=True,\n"
                  "                   env={'PYTHONDONTWRITEBYTECODE': '1', 'PATH': '/usr/bin:/bin'})\n"
                  "print(p.stderr)\n")
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ),
                             cwd=str(Path(__file__).resolve().parents[1]), check=True).stdout
    finally:
        cached.unlink(missing_ok=True)
    base = out.splitlines()[0]
    loaded = [line for line in out.splitlines() if line.startswith("# code object from")]
    assert any(base in line and line.endswith("scratch.cpython-311.pyc'".replace("311", "%d%d" % sys.version_info[:2]))
               for line in loaded), loaded
    assert any(base in line and line.endswith("/sandbox/disk.py") for line in loaded), loaded
