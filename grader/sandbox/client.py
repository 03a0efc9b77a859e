"""Trusted side of the sandbox: start a worker, talk to it, time it out, kill it.

``Sandbox`` starts ``grader.sandbox.worker`` in a fresh Python process (fresh JAX caches,
its own device count, a memory cap, its own session so the whole process group can be
killed), and exposes two calls:

* ``call(name, *args, **kwargs)`` -- run the learner's function ``name``;
* ``probe("module:function", *args, **kwargs)`` -- run a measuring probe next to it.

Both return trusted plain data (see ``grader.plaindata``) or raise ``SubmissionError``,
whose ``kind`` says what went wrong in words a learner can act on.  One time budget covers
the whole exercise (time spent waiting on the worker): once it is spent the worker is
killed and every later call fails fast.

The worker imports JAX as soon as it starts, but imports the learner's module only when
``begin_import`` says so -- after the trusted side has loaded its checks.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from grader import jaxcompat
from grader.sandbox import user as sandbox_user


GRADER_ROOT = Path(__file__).resolve().parents[2]
OUTPUT_CAP = 16 * 1024  # bytes of learner output kept, head and tail together
MAX_REPLY = 64 * 1024 * 1024


class SubmissionError(Exception):
    """The submission could not answer: not implemented, crashed, timed out, ...

    ``kind`` is one of the keys of ``SUBMISSION_FAILURES``.
    """

    def __init__(self, kind: str, message: str, *, detail: str = "", line: int | None = None, file: str = "",
                 exc_type: str = ""):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.detail = detail
        self.line = line
        self.file = file
        self.exc_type = exc_type  # the exception the learner's code raised, e.g. "ValueError"

    def __reduce__(self):  # pytest may pickle exceptions
        return (_rebuild_submission_error, (self.kind, self.message, self.detail, self.line, self.file, self.exc_type))


#: For each kind of SubmissionError: what a hidden check may say about it (the kind only --
#: the error's message may quote the check's inputs) and what to try next.
SUBMISSION_FAILURES: dict[str, tuple[str, str]] = {
    "not_implemented": ("not implemented yet: your function still raises NotImplementedError",
                        "replace the `raise NotImplementedError` with your code"),
    "missing_file": ("{name} was not found in your submission",
                     "keep the exercise's file name and folder (`grade list` shows them)"),
    "syntax_error": ("your file has a syntax error",
                     "fix the syntax error first; `python -m py_compile FILE` shows it too"),
    "import_error": ("importing your file failed", "run your file directly with `python FILE` to see why"),
    "missing_function": ("a function the exercise asks for is missing or was renamed",
                         "keep the function names and signatures of the stub"),
    "exception": ("your code raised {exc_type} during this check",
                  "run the public checks locally and read the traceback below"),
    "bad_return": ("your function returned something that is not plain data (arrays, numbers, strings, lists, dicts)",
                   "return JAX/NumPy arrays, numbers, strings, or lists/tuples/dicts of them"),
    "exit": ("your code called sys.exit/exit()", "remove sys.exit()/exit() calls from your file"),
    "memory": ("your code ran out of memory", "look for a huge intermediate array, or an array built in a Python loop"),
    "timeout": ("the exercise ran out of time",
                "look for an endless loop, a Python loop over a big batch, or a recompile on every call"),
    "crashed": ("the process running your code crashed", "run your file directly with `python FILE` to see the crash"),
}


def _rebuild_submission_error(kind, message, detail, line, file, exc_type=""):
    return SubmissionError(kind, message, detail=detail, line=line, file=file, exc_type=exc_type)


def compilation_cache_env(module_path: Path, user: "sandbox_user.SandboxUser | None" = None) -> dict[str, str]:
    """JAX's persistent compilation cache, one per submission folder.

    Learners re-grade the same code many times; a cache hit skips XLA's compile but still
    logs "Compiling"/"Finished XLA compilation" and fires the monitoring event, so compile
    counts are unchanged.  Each submission folder gets its own cache, so one submission's
    entries can never be loaded while grading another.  As root the cache lives where the
    sandbox's user can write it, handed over to that user at each start
    (``sandbox_user.cache_dir``).  GRADER_NO_CACHE=1 turns it off.
    """
    if os.environ.get("GRADER_NO_CACHE") == "1":
        return jaxcompat.compile_cache_env(None)
    key = hashlib.sha256(str(module_path.parent).encode()).hexdigest()[:16]
    if user is not None:
        return jaxcompat.compile_cache_env(str(sandbox_user.cache_dir(key, user)))
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jax-exercises-grader"
    return jaxcompat.compile_cache_env(str(base / key))


#: What sets the size of BLAS libraries' thread pools.
BLAS_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def worker_base_env() -> dict[str, str]:
    """The environment every worker (and zygote) starts from: the grader's own, minus JAX,
    XLA, pytest and grader settings, plus what makes a worker deterministic."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_", "PYTEST_", "GRADER_"))}
    env.update(
        {
            "PYTHONPATH": os.pathsep.join([str(GRADER_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0",
            "PYTHONUNBUFFERED": "1",
            "JAX_PLATFORMS": "cpu",
            "TF_CPP_MIN_LOG_LEVEL": "3",
        }
    )
    return env


class _OutputDrain(threading.Thread):
    """Reads the worker's stdout+stderr so it never blocks; keeps only a head and a tail."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream = stream
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def run(self) -> None:
        half = OUTPUT_CAP // 2
        while True:
            chunk = self.stream.read1(65536) if hasattr(self.stream, "read1") else self.stream.read(65536)
            if not chunk:
                return
            room = half - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            self.tail += chunk
            if len(self.tail) > half:
                self.dropped += len(self.tail) - half
                del self.tail[: len(self.tail) - half]

    def text(self) -> str:
        out = self.head.decode("utf-8", "replace")
        if self.dropped:
            out += f"\n... [{self.dropped} bytes of output dropped] ...\n"
        return out + self.tail.decode("utf-8", "replace")


class Sandbox:
    @classmethod
    def clean(cls, **kwargs) -> "Sandbox":
        """A worker that runs no learner code: a fresh JAX process for trusted measurements
        (e.g. the true compile count of a call sequence), which can run on another core
        while the learner's sandbox works."""
        return cls(None, **kwargs)

    def __init__(
        self,
        module_path: str | Path | None,
        *,
        timeout_s: float = 60.0,
        memory_mb: int = 4096,
        cpu_devices: int = 1,
        extra_env: dict[str, str] | None = None,
        zygote: "Zygote | None" = None,
    ):
        self.module_path = Path(module_path).resolve() if module_path is not None else None
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.cpu_devices = cpu_devices
        self.extra_env = dict(extra_env or {})
        self.zygote = zygote  # forks the worker from a process that imported JAX already
        self.proc: subprocess.Popen | None = None
        self._dead: SubmissionError | None = None
        self._ready = False
        self._import_sent = False
        self._next_id = 1
        self._buf = b""
        self.busy_s = 0.0  # time spent waiting on the worker: what the timeout budget counts
        self.user: sandbox_user.SandboxUser | None = None  # who the worker runs learner code as
        self._copy_dir: Path | None = None

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> "Sandbox":
        """Spawn the worker (returns at once; the import is awaited on first use)."""
        if self.proc is not None:
            return self
        if self.module_path is not None and not self.module_path.is_file():
            self._dead = SubmissionError(
                "missing_file", f"{self.module_path.name} was not found at {self.module_path}", file=str(self.module_path)
            )
            return self
        self._cwd = tempfile.TemporaryDirectory(prefix="grade-sandbox-")
        self.user = sandbox_user.sandbox_user()  # None unless root: then learner code runs unprivileged
        module_path = self.module_path
        env = worker_base_env()
        if self.user is not None:
            os.chown(self._cwd.name, self.user.uid, self.user.gid)
            env.update({"GRADER_SANDBOX_UID": self.user.env_value, "HOME": self._cwd.name, "TMPDIR": self._cwd.name})
            if module_path is not None:
                module_path = sandbox_user.copy_submission(module_path, Path(self._cwd.name) / "submission", self.user)
                self._copy_dir = module_path.parent
        env.update(
            {
                jaxcompat.CPU_DEVICES_ENV: str(self.cpu_devices),
                "GRADER_MODULE_PATH": str(module_path or ""),
                "GRADER_MEMORY_MB": str(self.memory_mb),
                "GRADER_CPU_LIMIT_S": str(int(4 * self.timeout_s + 60)),
            }
        )
        if self.module_path is not None:
            env.update(compilation_cache_env(self.module_path, self.user))
        else:
            env.update(jaxcompat.compile_cache_env(None))  # nothing a submission wrote is ever loaded here
        env.update(self.extra_env)
        if self.zygote is not None and self.zygote.alive:
            self.proc, self._to, self._from_fd = self.zygote.spawn(env, Path(self._cwd.name))
        else:
            self.proc, self._to, self._from_fd = self._spawn(env)
        self._drain = _OutputDrain(self.proc.stdout)
        self._drain.start()
        return self

    def _spawn(self, env: dict[str, str]):
        """Start a fresh worker process; returns (process, requests writer, replies fd)."""
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        env = {**env, "GRADER_PROTO_FDS": f"{to_child_r},{from_child_w}"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "grader.sandbox.worker"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(to_child_r, from_child_w),
            env=env,
            cwd=self._cwd.name,
            start_new_session=True,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        return proc, os.fdopen(to_child_w, "wb", buffering=0), from_child_r

    def close(self) -> None:
        """Stop the worker.  Every answer is already in; nothing in it is worth waiting for,
        so it is killed at once rather than left to tear JAX down."""
        if self.proc is None:
            return
        try:
            self._kill()
            if self.user is not None:
                sandbox_user.kill_all_processes_of(self.user)
        finally:
            try:
                self._to.close()
            except OSError:
                pass
            try:
                os.close(self._from_fd)
            except OSError:
                pass
            self._drain.join(timeout=2)
            # A process the learner's code left behind may still hold the output pipe open:
            # then the drain is still reading, and closing under it would block on its lock.
            if self.proc.stdout is not None and not self._drain.is_alive():
                try:
                    self.proc.stdout.close()
                except OSError:
                    pass
            self._cwd.cleanup()

    def _kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()

    def __enter__(self) -> "Sandbox":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def output(self) -> str:
        """What the learner's code printed (capped)."""
        return self._drain.text() if self.proc is not None else ""

    # -- protocol --------------------------------------------------------------------
    def _read_message(self) -> dict:
        # Only time spent waiting for the worker counts against the exercise's budget, so a
        # worker started early (to overlap JAX imports) is not charged for waiting its turn.
        t0 = time.monotonic()
        try:
            return self._read_message_within(t0)
        finally:
            self.busy_s += time.monotonic() - t0

    def _read_message_within(self, t0: float) -> dict:
        while b"\n" not in self._buf:
            remaining = self.timeout_s - self.busy_s - (time.monotonic() - t0)
            if remaining <= 0:
                self._fail(
                    SubmissionError(
                        "timeout",
                        f"the exercise ran out of time: it is allowed {self.timeout_s:g} s in all, "
                        f"and your code was still running when it was stopped",
                    )
                )
            ready, _, _ = select.select([self._from_fd], [], [], min(remaining, 1.0))
            if not ready:
                continue
            chunk = os.read(self._from_fd, 1 << 20)
            if not chunk:
                self.proc.wait()
                self._fail(self._crash_error())
            self._buf += chunk
            if len(self._buf) > MAX_REPLY:
                self._fail(SubmissionError("bad_return", "the result was too large to send back (over 64 MiB)"))
        line, _, self._buf = self._buf.partition(b"\n")
        try:
            return json.loads(line)
        except ValueError:
            self._fail(SubmissionError("crashed", "the sandbox sent something that is not a result; grading stopped"))

    def _crash_error(self) -> SubmissionError:
        code = self.proc.returncode
        if code is not None and code < 0:
            sig = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            how = f"was killed by signal {sig}"
            if sig in ("SIGKILL", "SIGSEGV", "SIGABRT"):
                how += f" (out of memory? the limit is {self.memory_mb} MiB)" if sig == "SIGKILL" else ""
        else:
            how = f"exited with status {code}"
        return SubmissionError(
            "crashed",
            f"the process running your code {how} before answering; "
            f"look for os._exit/sys.exit or a crash in your code",
            detail=self.output[-2000:],
        )

    def _fail(self, err: SubmissionError):
        self._dead = err
        self._kill()
        raise err

    def begin_import(self) -> None:
        """Let the worker import the learner's module now (it waits for this after starting)."""
        if self.proc is None:
            self.start()
        if self._import_sent or self._dead:
            return
        self._import_sent = True
        try:
            self._to.write(b'{"op":"import"}\n')
        except OSError:
            pass  # the crash is reported when the answer is awaited

    def _wait_ready(self) -> None:
        if self._ready:
            return
        if self._dead:
            raise self._dead
        self.begin_import()
        if self._dead:
            raise self._dead
        msg = self._read_message()
        if "error" in msg:
            self._fail(self._error_from(msg["error"]))
        self._ready = True

    def _error_from(self, err: dict) -> SubmissionError:
        kind = str(err.get("kind", "exception"))
        message = str(err.get("message", ""))
        fname = self.module_path.name if self.module_path else "<grader>"
        line = err.get("line")
        where = f"{fname}:{line}" if line else fname
        if kind == "syntax_error":
            text = err.get("text") or ""
            message = f"syntax error in {where}: {message}" + (f"\n    {text}" if text else "")
        elif kind == "not_implemented":
            message = f"not implemented yet ({where} raises NotImplementedError): fill in the TODO"
        elif kind == "import_error":
            message = f"importing {fname} failed: {err.get('type')}: {message}"
        elif kind == "exit":
            message = f"your code called sys.exit/exit() ({where}); return a value instead"
        elif kind == "memory":
            message = f"your code ran out of memory (the limit is {self.memory_mb} MiB) at {where}"
        elif kind == "exception":
            message = f"your code raised {err.get('type')}: {message} ({where})"
        detail = str(err.get("traceback", ""))
        if self._copy_dir is not None:  # show the learner their own path, not the sandbox's copy
            detail = detail.replace(str(self._copy_dir), str(self.module_path.parent))
        return SubmissionError(kind, message, detail=detail, line=line, file=fname,
                               exc_type=str(err.get("type") or ""))

    def request(self, op: str, target: str, *args: Any, **kwargs: Any) -> Any:
        from grader import plaindata  # numpy loads here, after the worker is already starting

        self._wait_ready()
        if self._dead:
            raise self._dead
        rid = self._next_id
        self._next_id += 1
        payload = {"id": rid, "op": op, "target": target, "args": plaindata.to_plain(list(args)), "kwargs": plaindata.to_plain(kwargs)}
        try:
            self._to.write((plaindata.dumps(payload) + "\n").encode("utf-8"))
        except (BrokenPipeError, OSError):
            self.proc.wait()
            self._fail(self._crash_error())
        msg = self._read_message()
        if msg.get("id") != rid:
            self._fail(SubmissionError("crashed", "the sandbox answered out of turn; grading stopped"))
        if "error" in msg:
            err = self._error_from(msg["error"])
            raise err
        return plaindata.from_plain(msg["ok"])

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self.request("call", name, *args, **kwargs)

    def probe(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self.request("probe", name, *args, **kwargs)


class _ForkedWorker:
    """A worker forked by a zygote, with the part of ``subprocess.Popen`` that ``Sandbox``
    uses.  It is the zygote's child, not ours: its exit status comes from the zygote."""

    def __init__(self, zygote: "Zygote", pid: int, stdout):
        self._zygote = zygote
        self.pid = pid
        self.stdout = stdout

    @property
    def returncode(self) -> int | None:
        return self._zygote.exit_status(self.pid)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        return self._zygote.wait_exit(self.pid, timeout=timeout if timeout is not None else 30.0)


class Zygote:
    """Trusted side of ``grader.sandbox.zygote``: start it once, then ``Sandbox(...,
    zygote=z)`` forks each worker from it instead of starting a new Python."""

    OPEN_TIMEOUT_S = 30.0

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._exits: dict[int, int] = {}
        self._pids: dict[int, int] = {}
        self._next = 1
        self._dead = False

    def start(self) -> "Zygote":
        env = worker_base_env()
        for var in BLAS_THREAD_VARS:
            env[var] = "1"  # no thread pools in a process that forks
        self.proc = subprocess.Popen([sys.executable, "-m", "grader.sandbox.zygote"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                     cwd=tempfile.gettempdir(), start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        for line in self.proc.stdout:
            msg = json.loads(line)
            with self._cond:
                if "exit" in msg:
                    self._exits[msg["exit"]] = msg["status"]
                else:
                    self._pids[msg["id"]] = msg["pid"]
                self._cond.notify_all()
        with self._cond:
            self._dead = True
            self._cond.notify_all()

    @property
    def alive(self) -> bool:
        return self.proc is not None and not self._dead and self.proc.poll() is None

    def exit_status(self, pid: int) -> int | None:
        with self._cond:
            return self._exits.get(pid)

    def wait_exit(self, pid: int, timeout: float) -> int | None:
        with self._cond:
            self._cond.wait_for(lambda: pid in self._exits or self._dead, timeout=timeout)
            return self._exits.get(pid, -signal.SIGKILL if self._dead else None)

    def spawn(self, env: dict[str, str], cwd: Path):
        """Fork a worker into ``cwd``; returns (process, requests writer, replies fd)."""
        fifos = cwd / ".io"
        fifos.mkdir(mode=0o700)
        for name in ("out", "requests", "replies"):
            os.mkfifo(fifos / name, 0o600)
        out_r = os.open(fifos / "out", os.O_RDONLY | os.O_NONBLOCK)
        replies_r = os.open(fifos / "replies", os.O_RDONLY | os.O_NONBLOCK)
        with self._lock:
            rid, self._next = self._next, self._next + 1
            line = json.dumps({"op": "spawn", "id": rid, "env": env, "cwd": str(cwd), "fifos": str(fifos)})
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        with self._cond:
            self._cond.wait_for(lambda: rid in self._pids or self._dead, timeout=self.OPEN_TIMEOUT_S)
            pid = self._pids.pop(rid, None)
        if pid is None:
            raise RuntimeError("the sandbox zygote did not answer")
        deadline = time.monotonic() + self.OPEN_TIMEOUT_S
        while True:  # the child opens its end of `requests` last: once we can, it is ready
            try:
                requests_w = os.open(fifos / "requests", os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError:
                if self.exit_status(pid) is not None or time.monotonic() > deadline:
                    requests_w = os.open(os.devnull, os.O_WRONLY)  # writes go nowhere; the read sees the crash
                    break
                time.sleep(0.001)
        os.set_blocking(requests_w, True)
        os.set_blocking(out_r, True)
        return (_ForkedWorker(self, pid, os.fdopen(out_r, "rb")), os.fdopen(requests_w, "wb", buffering=0),
                replies_r)

    def close(self) -> None:
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self._reader.join(timeout=5)
        self.proc.stdout.close()
        self.proc = None

    def __enter__(self) -> "Zygote":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
