"""Trusted side of the sandbox: start a worker, talk to it, time it out, kill it.

``Sandbox`` runs one submission's files (a ``grader.submission.Snapshot``) in a fresh
worker process (``grader.sandbox.worker``) and exposes two calls:

* ``call(name, *args, **kwargs)`` -- run the learner's function ``name``;
* ``probe("module:function", *args, **kwargs)`` -- run a measuring probe next to it.

Both return trusted plain data (see ``grader.plaindata``) or raise ``SubmissionError``,
whose ``kind`` says what went wrong in words a learner can act on.  One time budget covers
the whole exercise (time spent waiting on the worker): once it is spent the worker is
killed, the learner is told where their code was, and every later call fails fast.

Isolation, every time a worker starts:

* the worker sees a **fresh copy** of the snapshot's files in a private folder of its
  own (its working folder, ``HOME`` and ``TMPDIR``), never the submission itself;
* it starts as ``python -s -P`` (no user site-packages, no current or script folder on
  the import path) from a **read-only copy of the grader** (``grader.sandbox.install``),
  with an **environment of its own** -- nothing of the grader's environment (tokens,
  paths) is passed on;
* as root, it runs the learner's code as a **user of its own** (``grader.sandbox.user``),
  in a network namespace of its own; in every mode, once the learner's module loads, the
  **integrity guard** and the **seccomp filter** are on (see the worker);
* every answer is **authenticated** (an HMAC with a key sent before any learner code
  exists) and carries the worker's own count of compilations and traces (or why they
  could not be counted), the guard's accusations so far, each with the learner's file and
  line (``integrity``), and the operations it refused quietly since the last answer
  (``refusals``: ordinary exceptions in the learner's code, shown with a failed check's
  feedback, never held against anyone); a line the learner's code wrote to the answer
  pipe fails the HMAC and is itself an accusation;
* every answer is **bounded** before it is decoded: ``MAX_REPLY`` bytes, and
  ``ANSWER_LIMITS`` elements and depth (``grader.boundedjson``; the worker refuses more
  itself, kind ``answer_too_large``), and the time the trusted side spends reading it back
  counts against the exercise's budget like the time spent waiting for it (``decode_s``);
* **closing** kills the worker's process group and, as root, every process of the
  sandbox's user, and removes every file that user left in the shared temporary folders.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from grader import boundedjson, jaxcompat
from grader.sandbox import disk, install, outcomes, scratch
from grader.sandbox import user as sandbox_user
from grader.submission import Snapshot, read_folder

OUTPUT_CAP = 16 * 1024  # bytes of learner output kept, head and tail together
MAX_REPLY = 64 * 1024 * 1024
#: What one answer may cost to decode beyond its bytes: the worker's own limit
#: (``plaindata.MAX_ANSWER_ELEMENTS``) plus its envelope, and the deepest nesting its encoder
#: writes (a tuple is two levels, an array three, the envelope one).  Kept in step with
#: ``grader.plaindata`` without importing numpy before the worker starts.
ANSWER_LIMITS = boundedjson.Limits(max_bytes=MAX_REPLY, max_elements=100_000 + 16, max_depth=2 * (32 + 1) + 4)
WHERE_WAIT_S = 1.0  # how long a timed-out worker gets to print where it was


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
    "link": ("{name} is a link, not a file", "commit the file itself: the grader never follows links"),
    "empty_file": ("{name} is empty", "write your code in it, or bring the stub back with `grade reset`"),
    "not_a_file": ("{name} is not a regular file", "the exercise's file must be a plain Python file"),
    "too_large": ("{name} is too large to grade", "keep your file under 4 MiB"),
    "disk": ("your code wrote more to disk than a sandbox may write in all",
             f"keep what your code writes under {disk.SANDBOX_DISK_MB} MiB: no exercise needs big files"),
    "bad_commit": ("your commit holds a file name git itself refuses (an absolute path, '..', '.git', a duplicate)",
                   "commit with plain git commands; `git fsck` in your repository shows the bad entry"),
    "syntax_error": ("your file has a syntax error",
                     "fix the syntax error first; `python -m py_compile FILE` shows it too"),
    "import_error": ("importing your file failed", "run your file directly with `python FILE` to see why"),
    "missing_function": ("a function the exercise asks for is missing or was renamed",
                         "keep the function names and signatures of the stub"),
    "exception": ("your code raised {exc_type} during this check",
                  "run the public checks locally and read the traceback below"),
    "bad_return": ("your function returned something that is not plain data (arrays, numbers, strings, lists, dicts)",
                   "return JAX/NumPy arrays, numbers, strings, or lists/tuples/dicts of them"),
    "answer_too_large": ("your function returned more than the grader reads back (too many values or bytes)",
                         "return a NumPy/JAX array instead of long lists or big dicts: an array of any size "
                         "counts as a few values"),
    "exit": ("your code called sys.exit/exit()", "remove sys.exit()/exit() calls from your file"),
    "memory": ("your code ran out of memory", "look for a huge intermediate array, or an array built in a Python loop"),
    "timeout": ("the exercise ran out of time",
                "look for an endless loop, a Python loop over a big batch, or a recompile on every call"),
    "crashed": ("the process running your code crashed", "run your file directly with `python FILE` to see the crash"),
}


class _Forged(Exception):
    """An answer line that fails the HMAC: written by the learner's code, skipped."""


class _Stale(_Forged):
    """An authentic answer to an older request, whose waiter gave up (a check's deadline):
    skipped, so the sandbox's next answer is the one awaited."""


def _int(value) -> int:
    return value if type(value) is int and 0 <= value < 1 << 31 else 0


def _rebuild_submission_error(kind, message, detail, line, file, exc_type=""):
    return SubmissionError(kind, message, detail=detail, line=line, file=file, exc_type=exc_type)


#: What sets the size of BLAS libraries' thread pools (passed on to workers when set).
BLAS_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def base_env() -> dict[str, str]:
    """The environment every worker and zygote starts from: an allowlist, nothing inherited
    but the BLAS thread settings (a token in the grader's environment never reaches it)."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "JAX_PLATFORMS": "cpu",
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }
    env.update({k: os.environ[k] for k in BLAS_THREAD_VARS if k in os.environ})
    return env


def worker_command(module: str) -> list[str]:
    """``python -s -P -c ...`` running ``module``'s ``main`` from the grader's read-only
    copy (with PYTHONHASHSEED from the environment, which ``-I`` would ignore)."""
    base = str(install.grader_base())
    code = f"import sys; sys.path.insert(0, {base!r}); from {module} import main; main()"
    return [sys.executable, "-s", "-P", "-c", code]


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
            try:
                chunk = self.stream.read1(65536) if hasattr(self.stream, "read1") else self.stream.read(65536)
            except (OSError, ValueError):
                return
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
            out += f"\n... [{self.dropped} bytes of output cut] ...\n"
        return out + self.tail.decode("utf-8", "replace")


_FAULT_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)', re.MULTILINE)
_FAULT_BLOCK = re.compile(r"^(?:Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):\n(?:  .*\n?)*",
                          re.MULTILINE)


class Sandbox:
    @classmethod
    def clean(cls, **kwargs) -> "Sandbox":
        """A worker that runs no learner code: a fresh JAX process for trusted measurements
        (e.g. the true compile count of a call sequence), which can run on another core
        while the learner's sandbox works."""
        return cls(None, **kwargs)

    def __init__(
        self,
        source: Snapshot | str | Path | None,
        *,
        timeout_s: float = 60.0,
        memory_mb: int = 4096,
        cpu_devices: int = 1,
        extra_env: dict[str, str] | None = None,
        zygote: "Zygote | None" = None,
        compile_cache: Path | None = None,
        course_cache: Path | None = None,
        probes: str = "all",
        disk_mb: int | None = None,
        private_fs: bool = True,
        jax: bool = True,
    ):
        if isinstance(source, (str, Path)):
            path = Path(source)
            source = read_folder(path.parent, (), (path.name,))
        self.snapshot: Snapshot | None = source
        #: the learner file's path as the learner knows it (messages show this, never the copy)
        self.module_path = Path(source.display_path) if source is not None else None
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.cpu_devices = cpu_devices
        self.extra_env = dict(extra_env or {})
        self.zygote = zygote  # forks the worker from a process that imported JAX already
        self.compile_cache = compile_cache  # a folder for JAX's persistent cache, or None (off)
        #: a compile cache shared by the gradings of the course's own files (``grader.cache.course_cache``)
        self.course_cache = course_cache
        self.probes = probes  # which probe modules the worker imports (grader.sandbox.context.preload_probes)
        self.disk_mb = disk_mb or disk.SANDBOX_DISK_MB  # what the sandbox may write in all (grader.sandbox.disk)
        self.private_fs = private_fs  # as root, a tmpfs of that size over its folder (else the watchdog alone)
        self._disk_ticket: int | None = None
        self._disk_over: tuple[int, int] | None = None
        self.jax = jax  # False: a worker where JAX does not exist (grader.sandbox.nojax); calls and nojax_probes only
        self.proc: subprocess.Popen | None = None
        self._dead: SubmissionError | None = None
        self._ready = False
        self._import_sent = False
        self._next_id = 1
        self._buf = bytearray()
        self._key = os.urandom(32)
        self.busy_s = 0.0  # waiting on the worker and reading its answers: what the timeout budget counts
        self.decode_s = 0.0  # the part of busy_s spent reading answers back on the trusted side
        self.user: sandbox_user.SandboxUser | None = None  # who the worker runs learner code as
        self._base: Path | None = None
        self._box: Path | None = None  # the worker's own folder: cwd, HOME, TMPDIR, the learner's files
        self.integrity: list[str] = []  # accusations, each with its evidence (sticky)
        self.refusals: list[outcomes.Refusal] = []  # quiet refusals, in the order they happened
        self.import_refusals: list[outcomes.Refusal] = []  # ... of them, those while the learner's module loaded
        self.unmeasured = ""  # why the worker's counts stopped being measurable ("" while they are)
        self._last_meter: dict[str, int] = {}  # {"compiles", "traces"} caused by the last request
        self._request_target = ""  # what the last request ran, for evidence
        self.used_probes = False
        self._started = 0.0
        self.wall_s = 0.0  # from start to close
        self.start_cpu_s = self.import_cpu_s = 0.0  # the worker's start-up and the learner's import (its hello)
        self._popen_cpu_s = 0.0
        self._user_held = False  # acquired at start, released once at close

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> "Sandbox":
        """Spawn the worker (returns at once; the import is awaited on first use)."""
        if self.proc is not None or self._dead is not None:
            return self
        snap = self.snapshot
        if snap is not None and snap.problem is not None:
            self._dead = SubmissionError(snap.problem.kind, snap.problem.message,
                                         file=str(self.module_path or snap.problem.path))
            return self
        self._started = time.monotonic()
        self._base = scratch.make("sandbox", sandbox_user.temp_root())
        os.chmod(self._base, 0o711)  # the sandbox's user may pass through to its box, not look around
        self._box = self._base / "box"
        self._box.mkdir(mode=0o700)
        (self._box / "tmp").mkdir(mode=0o700)
        self.user = sandbox_user.sandbox_user()  # None unless root: then learner code runs unprivileged
        sandbox_user.acquire(self.user)
        self._user_held = True
        module_path = snap.write_to(self._box) if snap is not None else None
        if self.user is not None:
            sandbox_user.hand_over(self._box, self.user)
        env = self._env(module_path)
        if self.zygote is not None and self.zygote.alive and self.jax:  # a zygote has JAX loaded
            self.proc, self._to, self._from_fd = self.zygote.spawn(env, self._box, self._base / "io")
        else:
            self.proc, self._to, self._from_fd = self._spawn(env)
        self._drain = _OutputDrain(self.proc.stdout)
        self._drain.start()
        self._disk_ticket = disk.Watchdog.shared().watch(self._box, self.disk_mb << 20, self._over_disk)
        self._send(b"HELLO " + self._key.hex().encode() + b"\n")
        return self

    def _check_disk(self) -> None:
        """No answer is taken from a sandbox over its disk budget: measured again after each
        one (the watchdog looks only every ``disk.WATCH_INTERVAL_S`` s)."""
        __tracebackhide__ = True  # plain pytest shows the learner's failure, not these frames
        budget = self.disk_mb << 20
        used, entries = disk.usage(self._box, stop_bytes=budget, stop_entries=disk.SANDBOX_DISK_FILES)
        if used > budget or entries > disk.SANDBOX_DISK_FILES:
            self._over_disk(used, entries)
        if self._disk_over is not None:
            self._fail(self._crash_error())

    def _over_disk(self, used: int, entries: int) -> None:
        """The watchdog found the sandbox's folder over its budget: stop it at once (the
        next read of its answers reports why: ``_crash_error``)."""
        self._disk_over = (used, entries)
        self.kill()

    def _env(self, module_path: Path | None) -> dict[str, str]:
        env = base_env()
        box = str(self._box)
        env.update({
            # the usual places libraries keep caches and settings, all inside the sandbox's
            # folder (matplotlib's font cache, XDG caches); a name for getpass.getuser()
            "HOME": box,
            "TMPDIR": str(self._box / "tmp"),
            "XDG_CACHE_HOME": str(self._box / ".cache"),
            "XDG_CONFIG_HOME": str(self._box / ".config"),
            "MPLCONFIGDIR": str(self._box / ".config" / "matplotlib"),
            "USER": "learner",
            "LOGNAME": "learner",
            jaxcompat.CPU_DEVICES_ENV: str(self.cpu_devices),
            "GRADER_MODULE_PATH": str(module_path or ""),
            "GRADER_SANDBOX_DIR": box,
            "GRADER_MEMORY_MB": str(self.memory_mb),
            "GRADER_CPU_LIMIT_S": str(int(4 * self.timeout_s + 60)),
            "GRADER_PROBES": self.probes,
            "GRADER_DISK_MB": str(self.disk_mb),
        })
        if not self.private_fs:
            env[disk.NO_TMPFS_ENV] = "1"
        if not self.jax:
            env["GRADER_NO_JAX"] = "1"
        if self.user is not None:
            env["GRADER_SANDBOX_UID"] = self.user.env_value
        # No persistent compile cache when learner code runs as a user of its own (as root):
        # one cache shared between users is a channel between gradings (grader.cache), and
        # the worker's first compiles, as root, would leave files that user cannot lock.
        cache = (str(self.compile_cache) if self.compile_cache is not None and module_path is not None
                 and self.user is None else None)
        if self.course_cache is not None and self.jax:  # every worker, any user: no learner's file is graded
            cache = str(self.course_cache)
            env.update(jaxcompat.compile_cache_env(cache, max_bytes=-1))  # no cap: no lock file one user holds
        else:
            env.update(jaxcompat.compile_cache_env(cache))
        if cache:
            env["GRADER_WRITABLE"] = cache
        env.update(self.extra_env)
        return env

    def _spawn(self, env: dict[str, str]):
        """Start a fresh worker process; returns (process, requests writer, answers fd)."""
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        env = {**env, "GRADER_PROTO_FDS": f"{to_child_r},{from_child_w}"}
        proc = subprocess.Popen(
            worker_command("grader.sandbox.worker"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(to_child_r, from_child_w),
            env=env,
            cwd=str(self._box),
            start_new_session=True,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        return proc, os.fdopen(to_child_w, "wb", buffering=0), from_child_r

    @property
    def cpu_s(self) -> float:
        """CPU seconds the worker used (all its threads), known once it is closed."""
        if isinstance(self.proc, _ForkedWorker):
            return self.proc.cpu_s
        return self._popen_cpu_s

    def close(self) -> None:
        """Stop the worker and clean up after it.  Every answer is already in; nothing in it
        is worth waiting for, so it is killed at once rather than left to tear JAX down."""
        if self._started and not self.wall_s:
            self.wall_s = time.monotonic() - self._started
        if self._disk_ticket is not None:
            disk.Watchdog.shared().forget(self._disk_ticket)
            self._disk_ticket = None
        if self.proc is None:
            if self._base is not None:
                shutil.rmtree(self._base, ignore_errors=True)
                self._release_user()
            return
        try:
            self._kill()
            self._release_user()
        finally:
            for closer in (self._to.close, lambda: os.close(self._from_fd)):
                try:
                    closer()
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
            if self._base is not None:
                shutil.rmtree(self._base, ignore_errors=True)

    def _release_user(self) -> None:
        """End every process of the sandbox's user, once: a second close must not reach a
        later sandbox that was given the same user id."""
        user, self._user_held = (self.user if self._user_held else None), False
        sandbox_user.release(user)

    def kill(self) -> None:
        """Send the worker's process group SIGKILL without waiting (``close`` waits): the
        trusted side stops every sandbox of a grading at once, and the kernel tears their
        JAX processes down in parallel."""
        if self.proc and self.proc.poll() is None:
            if not isinstance(self.proc, _ForkedWorker):
                self._popen_cpu_s = _cpu_seconds_of(self.proc.pid)  # ours: not reaped, so still its pid
            self._send_signal(signal.SIGKILL, group=True)

    def _send_signal(self, sig: int, group: bool) -> None:
        if isinstance(self.proc, _ForkedWorker):
            self.proc.send(sig, group)
        else:
            _signal_popen(self.proc, sig, group)

    def _kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.kill()
            self.proc.wait()

    def __enter__(self) -> "Sandbox":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def output(self) -> str:
        """What the learner's code printed (capped; the grader's own stack dump left out)."""
        return self.their_paths(_FAULT_BLOCK.sub("", self._drain.text())) if self.proc is not None else ""

    # -- protocol --------------------------------------------------------------------
    def _send(self, data: bytes) -> None:
        try:
            self._to.write(data)
        except OSError:
            pass  # the crash is reported when the answer is awaited

    def _read_line(self) -> bytes:
        # Only time spent waiting for the worker (and reading its answers: ``_charge``) counts
        # against the exercise's budget, so a worker started early (to overlap JAX imports) is
        # not charged for waiting its turn.
        t0 = time.monotonic()
        try:
            end = self._buf.find(b"\n")
            while end < 0:
                remaining = self.timeout_s - self.busy_s - (time.monotonic() - t0)
                if remaining <= 0:
                    self._fail(self._timeout_error())
                ready, _, _ = select.select([self._from_fd], [], [], min(remaining, 1.0))
                if not ready:
                    continue
                chunk = os.read(self._from_fd, 1 << 20)
                if not chunk:
                    self.proc.wait()
                    self._fail(self._crash_error())
                seen = len(self._buf)
                self._buf += chunk  # a bytearray: no copy of what came before
                if len(self._buf) > MAX_REPLY:
                    self._fail(SubmissionError(
                        "answer_too_large", f"your function's answer was too large to send back (over "
                                            f"{MAX_REPLY >> 20} MiB): return less, or smaller arrays"))
                end = self._buf.find(b"\n", seen)
            line = bytes(self._buf[:end])
            del self._buf[:end + 1]
            return line
        finally:
            self.busy_s += time.monotonic() - t0

    def _charge(self, since: float) -> None:
        """Count the trusted side's work on an answer since ``since`` (checking its HMAC,
        its bounds, decoding and rebuilding it) against the exercise's budget: an answer
        cheap to make and dear to read must not buy time the budget never sees."""
        spent = time.monotonic() - since
        self.busy_s += spent
        self.decode_s += spent

    def _check_budget(self) -> None:
        """The budget spent while reading an answer back stops the sandbox as waiting would."""
        __tracebackhide__ = True  # plain pytest shows the learner's failure, not these frames
        if self.busy_s > self.timeout_s:
            running = self.busy_s - self.decode_s
            advice = ("; return NumPy/JAX arrays rather than long lists, big dicts or huge strings"
                      if self.decode_s > running else "")
            self._fail(SubmissionError(
                "timeout", f"the exercise ran out of time: it is allowed {self.timeout_s:g} s in all, and it took "
                           f"{running:.1f} s running your code and {self.decode_s:.1f} s reading back what your "
                           f"functions returned{advice}"))

    def _read_answer(self, rid: int) -> dict:
        """The worker's answer to request ``rid``; lines that fail the HMAC were written by
        the learner's code, not by the worker: an accusation, and skipped."""
        while True:
            line = self._read_line()
            t0 = time.monotonic()
            try:
                return self._decode_answer(line, rid)
            except _Forged:
                continue
            finally:
                self._charge(t0)

    def _decode_answer(self, line: bytes, rid: int) -> dict:
        """One answer line: authenticated (``_Forged`` when not), then decoded within bounds."""
        __tracebackhide__ = True  # plain pytest shows the learner's failure, not these frames
        try:  # slices of one view: a 64 MiB answer is not copied once per step
            first = line.index(b" ")
            second = line.index(b" ", first + 1)
            start = second + 1 + int(line[first + 1:second])
            view = memoryview(line)
            header, body = bytes(view[second + 1:start]), view[start:]
            digest = hmac.new(self._key, header + b"\n", hashlib.sha256)
            digest.update(body)
            authentic = start <= len(line) and hmac.compare_digest(line[:first], digest.hexdigest().encode())
        except ValueError:
            authentic = False
        if not authentic:
            self.note_accusation("answer_pipe", detail=f"a line that is not the worker's answer arrived while "
                                                       f"{self._request_target or 'your file was imported'}")
            raise _Forged
        head = json.loads(header)
        for item in head.get("integrity", []):
            if isinstance(item, dict):
                self.note_accusation(str(item.get("kind", "")), str(item.get("file", "")), _int(item.get("line")),
                                     what=str(item.get("what", ""))[:200])
        for item in head.get("refused", [])[:64]:
            if isinstance(item, dict):
                self._note_refusal(item, at_import=rid == 0)
        answered = head.get("id")
        if type(answered) is int and answered < rid:
            raise _Stale  # the reference solution's sandbox, paired with the learner's, relies on this
        if answered != rid:
            self._fail(SubmissionError("crashed", "the sandbox answered out of turn; grading stopped"))
        self.unmeasured = str(head.get("unmeasured") or "")[:100]
        self._last_meter = {"compiles": int(head.get("compiles", 0)), "traces": int(head.get("traces", 0))}
        try:
            return boundedjson.loads(bytes(body), ANSWER_LIMITS)
        except boundedjson.TooCostly as exc:  # the worker refuses these itself: its encoder was bypassed
            self._fail(SubmissionError(
                "answer_too_large", f"your function's answer is {exc}, more than the grader reads back; "
                                    f"return a NumPy/JAX array instead of long lists or big dicts"))
        except ValueError:
            self._fail(SubmissionError("crashed", "the sandbox sent something that is not a result"))

    @property
    def last_meter(self) -> dict[str, int]:
        """The compilations and traces the last request caused, as the worker counted them.

        Raises ``grader.feedback.Unmeasured`` (a failed check that says why) once the
        learner's code cleared JAX's caches: from then on the counts cannot be trusted."""
        if self.unmeasured:
            from grader.feedback import Unmeasured

            raise Unmeasured(self.unmeasured)
        return self._last_meter

    @last_meter.setter
    def last_meter(self, value: dict[str, int]) -> None:
        self._last_meter = dict(value)

    def note_violation(self, reason: str) -> None:
        """Record an integrity violation, worded in full (``note_accusation`` words one)."""
        from grader.plaindata import clean_text

        reason = clean_text(reason)[:400]
        if reason not in self.integrity and len(self.integrity) < 16:
            self.integrity.append(reason)

    def note_accusation(self, kind: str, file: str = "", line: int = 0, detail: str = "", what: str = "") -> None:
        """An accusation with its evidence: the learner's file and line, quoted from the
        snapshot (never from the learner's process), or ``detail`` when there is no line;
        ``what`` names the grader's object that changed (``grader_rebind``)."""
        named = f": `{what}`" if what else ""
        self.note_violation(outcomes.accusation_text(kind) + named + self._evidence(file, line, detail))

    def _evidence(self, file: str, line: int, detail: str = "") -> str:
        where = self._learner_file(file)
        if where is not None and line > 0:
            text = self.snapshot.files.get(file, b"").decode("utf-8", "replace").splitlines()
            code = text[line - 1].strip()[:160] if line <= len(text) else ""
            return f" ({where}, line {line}" + (f": `{code}`" if code else "") + ")"
        if file:
            return " (in code your file made at run time with exec or compile)"
        return f" ({detail})" if detail else ""

    def _learner_file(self, file: str) -> str | None:
        """``file`` (relative to the sandbox's folder) as the learner knows it, if it is one
        of the snapshot's files."""
        if not file or self.snapshot is None or self.module_path is None or file not in self.snapshot.files:
            return None
        if file == self.snapshot.module_file:
            return str(self.module_path)
        return str(self.module_path.parent / file)

    def _note_refusal(self, item: dict, at_import: bool) -> None:
        from grader.plaindata import clean_text

        kind = str(item.get("kind", ""))
        if kind not in outcomes.REFUSALS:
            return
        file = str(item.get("file", ""))
        where = self._learner_file(file)
        refusal = outcomes.Refusal(kind, self.their_paths(clean_text(str(item.get("detail", ""))))[:200],
                                   where or "", _int(item.get("line")) if where else 0)
        if refusal not in self.refusals and len(self.refusals) < 64:
            self.refusals.append(refusal)
            if at_import:
                self.import_refusals.append(refusal)

    def _timeout_error(self) -> SubmissionError:
        where = self._where()
        return SubmissionError(
            "timeout",
            f"the exercise ran out of time: it is allowed {self.timeout_s:g} s in all, and your code was still "
            f"running when it was stopped" + (f"; it was at {where}" if where else ""))

    def _where(self) -> str:
        """Where the learner's code was: the worker prints its threads' stacks on SIGUSR1."""
        if self.proc is None or self.proc.poll() is not None or self.module_path is None:
            return ""
        self._send_signal(signal.SIGUSR1, group=False)
        copy = str(self._box / self.snapshot.module_file) if self._box and self.snapshot else ""
        deadline = time.monotonic() + WHERE_WAIT_S
        while time.monotonic() < deadline:
            time.sleep(0.05)
            for m in _FAULT_FRAME.finditer(self._drain.text()):
                if copy and m.group("file") == copy:  # most recent call first: the innermost learner frame
                    return f"{self.module_path.name}:{m.group('line')} (in {m.group('func')})"
        return ""

    def _crash_error(self) -> SubmissionError:
        if self._disk_over is not None:
            return SubmissionError("disk", disk.over_budget_message(self.disk_mb),
                                   detail=f"{self._disk_over[0] >> 20} MiB in {self._disk_over[1]} files and folders "
                                          f"when it was stopped")
        code = self.proc.returncode
        if code is not None and code < 0:
            sig = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            how = f"was killed by signal {sig}"
            if sig == "SIGKILL":
                how += f" (out of memory? the limit is {self.memory_mb} MiB)"
            elif sig == "SIGXFSZ":
                how += " (it wrote a file over the size limit)"
        else:
            how = f"exited with status {code}"
        return SubmissionError(
            "crashed",
            f"the process running your code {how} before answering; "
            f"look for os._exit/sys.exit or a crash in your code",
            detail=self.output[-2000:],
        )

    def _fail(self, err: SubmissionError):
        __tracebackhide__ = True  # plain pytest shows the learner's failure, not these frames
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
        self._send(b"IMPORT\n")

    def _wait_ready(self) -> None:
        __tracebackhide__ = True  # plain pytest shows the learner's failure, not these frames
        if self._ready:
            return
        if self._dead:
            raise self._dead
        self.begin_import()
        if self._dead:
            raise self._dead
        msg = self._read_answer(0)
        if "error" in msg:
            self._fail(self._error_from(msg["error"]))
        hello = msg.get("ok") if isinstance(msg.get("ok"), dict) else {}
        # the worker's own account of its start-up and of the learner's import (timings only)
        self.start_cpu_s, self.import_cpu_s = (float(v) if type(v) in (int, float) and 0 <= v < 1e6 else 0.0
                                               for v in (hello.get("start_cpu_s"), hello.get("import_cpu_s")))
        self._ready = True

    def _error_from(self, err: dict) -> SubmissionError:
        from grader.plaindata import clean_text

        err = err if isinstance(err, dict) else {}
        kind = str(err.get("kind", "exception"))
        if kind not in SUBMISSION_FAILURES:
            kind = "exception"
        message = clean_text(str(err.get("message", "")))[:2000]
        fname = self.module_path.name if self.module_path else "<grader>"
        line = err.get("line") if type(err.get("line")) is int else None
        where = f"{fname}:{line}" if line else fname
        exc_type = clean_text(str(err.get("type") or ""))[:100]
        if kind == "syntax_error":
            text = clean_text(str(err.get("text") or ""))[:300]
            message = f"syntax error in {where}: {message}" + (f"\n    {text}" if text else "")
        elif kind == "not_implemented":
            message = f"not implemented yet ({where} raises NotImplementedError): fill in the TODO"
        elif kind == "import_error":
            message = f"importing {fname} failed: {exc_type}: {message}"
        elif kind == "exit":
            message = f"your code called sys.exit/exit() ({where}); return a value instead"
        elif kind == "memory":
            message = f"your code ran out of memory (the limit is {self.memory_mb} MiB) at {where}"
        elif kind == "exception":
            message = f"your code raised {exc_type}: {message} ({where})"
        elif kind == "disk":
            message = f"{disk.over_budget_message(self.disk_mb)} ({where}: {exc_type}: {message})"
        detail = clean_text(str(err.get("traceback", "")))[:4000]
        message, detail = self.their_paths(message), self.their_paths(detail)
        return SubmissionError(kind, message, detail=detail, line=line, file=fname, exc_type=exc_type)

    def their_paths(self, text: str) -> str:
        """``text`` with the sandbox's copy of the learner's files named as the learner knows
        them (a file graded with ``--file`` keeps its own name)."""
        if self._box is None or self.module_path is None or self.snapshot is None:
            return text
        text = text.replace(str(self._box / self.snapshot.module_file), str(self.module_path))
        return text.replace(str(self._box) + os.sep, str(self.module_path.parent) + os.sep)

    def request(self, op: str, target: str, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # plain pytest shows the learner's failure, not these frames
        return self.result(self.submit(op, target, *args, **kwargs))

    def submit(self, op: str, target: str, *args: Any, **kwargs: Any) -> int:
        """Send a request without waiting for its answer (``result`` waits): two sandboxes
        given the same request work on it at the same time."""
        __tracebackhide__ = True  # plain pytest shows the learner's failure, not these frames
        from grader import plaindata  # numpy loads here, after the worker is already starting

        self._wait_ready()
        if self._dead:
            raise self._dead
        if op == "probe":
            self.used_probes = True
        rid = self._next_id
        self._next_id += 1
        self._request_target = f"the grader {'called' if op == 'call' else 'measured'} `{target}`"
        payload = {"op": op, "target": target, "args": plaindata.to_plain(list(args)), "kwargs": plaindata.to_plain(kwargs)}
        self._send_request(rid, plaindata.dumps(payload).encode("utf-8"))
        return rid

    def _send_request(self, rid: int, body: bytes) -> None:
        """Write request ``rid`` (its JSON ``body``) to the worker."""
        try:
            self._to.write(b"%d " % rid + body + b"\n")
        except (BrokenPipeError, OSError):
            self.proc.wait()
            self._fail(self._crash_error())

    def result(self, rid: int) -> Any:
        """The answer to request ``rid`` (from ``submit``); ``last_meter`` is then its meter."""
        __tracebackhide__ = True  # plain pytest shows the learner's failure, not these frames
        if self._dead:
            raise self._dead
        msg = self._read_answer(rid)
        self._check_budget()
        self._check_disk()
        if not isinstance(msg, dict) or ("ok" not in msg and "error" not in msg):
            self._fail(SubmissionError("crashed", "the sandbox sent something that is not a result"))
        return self._answer_of(msg)

    def _answer_of(self, msg: dict) -> Any:
        """A decoded answer (``{"ok": ...}`` or ``{"error": ...}``) as the check sees it."""
        __tracebackhide__ = True  # plain pytest shows the learner's failure, not these frames
        from grader import plaindata

        if "error" in msg:
            raise self._error_from(msg["error"])
        t0 = time.monotonic()
        try:
            return plaindata.from_plain(msg["ok"])
        except plaindata.NotPlainData as exc:  # what the worker's own check should have refused
            raise SubmissionError("bad_return", str(exc)[:500]) from None
        finally:
            self._charge(t0)
            self._check_budget()

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # plain pytest shows the learner's failure, not these frames
        return self.request("call", name, *args, **kwargs)

    def probe(self, name: str, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # plain pytest shows the learner's failure, not these frames
        return self.request("probe", name, *args, **kwargs)


def _cpu_seconds_of(pid: int) -> float:
    """CPU seconds (user + system, all threads) process ``pid`` has used so far (Linux; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def _signal_popen(proc: subprocess.Popen, sig: int, group: bool) -> None:
    """A signal to a worker we started ourselves: its pid stays its own until we reap it."""
    if proc.poll() is None:
        try:
            (os.killpg if group else os.kill)(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


class _ForkedWorker:
    """A worker forked by a zygote, with the part of ``subprocess.Popen`` that ``Sandbox``
    uses.  It is the zygote's child, not ours: the zygote reaps it, so its pid may belong to
    another process by the time we look.  It is named by its spawn id, its exit status
    comes from the zygote, and the zygote sends it signals (``grader.sandbox.zygote``)."""

    def __init__(self, zygote: "Zygote", rid: int, pid: int, stdout):
        self._zygote = zygote
        self.rid = rid
        self.pid = pid  # for messages only: never signalled from here
        self.stdout = stdout

    @property
    def returncode(self) -> int | None:
        return self._zygote.exit_status(self.rid)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        return self._zygote.wait_exit(self.rid, timeout=timeout if timeout is not None else 30.0)

    def send(self, sig: int, group: bool) -> None:
        self._zygote.signal(self.rid, sig, group)

    @property
    def cpu_s(self) -> float:
        """CPU seconds the worker used, all its threads (once it has ended; 0 before)."""
        return self._zygote.cpu_of(self.rid)


class Zygote:
    """Trusted side of ``grader.sandbox.zygote``: start it once, then ``Sandbox(...,
    zygote=z)`` forks each worker from it instead of starting a new Python."""

    OPEN_TIMEOUT_S = 30.0

    def __init__(self, probes: str = "all") -> None:
        self.probes = probes  # the probe modules imported once here (grader.sandbox.context.preload_probes)
        self.proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._exits: dict[int, int] = {}
        self._cpu: dict[int, float] = {}  # spawn id -> CPU seconds the child used (once it ended)
        self._pids: dict[int, int] = {}
        self._next = 1
        self._dead = False
        self._cwd: Path | None = None

    def start(self) -> "Zygote":
        env = base_env()
        for var in BLAS_THREAD_VARS:
            env[var] = "1"  # no thread pools in a process that forks
        env["GRADER_PROBES"] = self.probes
        self._cwd = scratch.make("zygote")  # private: nothing planted here runs
        env["GRADER_START_DIR"] = str(self._cwd)  # the zygote removes it once it is running
        self.proc = subprocess.Popen(worker_command("grader.sandbox.zygote"), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                     cwd=str(self._cwd), start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        for line in self.proc.stdout:
            msg = json.loads(line)
            with self._cond:
                if "exit" in msg:
                    self._exits[msg["exit"]] = msg["status"]
                    self._cpu[msg["exit"]] = float(msg.get("cpu", 0.0))
                else:
                    self._pids[msg["id"]] = msg["pid"]
                self._cond.notify_all()
        with self._cond:
            self._dead = True
            self._cond.notify_all()

    @property
    def alive(self) -> bool:
        return self.proc is not None and not self._dead and self.proc.poll() is None

    def exit_status(self, rid: int) -> int | None:
        """How child ``rid`` (a spawn id) ended, or None while it runs; a child of a zygote
        that died died with it (its parent-death signal)."""
        with self._cond:
            return self._exits.get(rid, -signal.SIGKILL if self._dead else None)

    def wait_exit(self, rid: int, timeout: float) -> int | None:
        with self._cond:
            self._cond.wait_for(lambda: rid in self._exits or self._dead, timeout=timeout)
            return self._exits.get(rid, -signal.SIGKILL if self._dead else None)

    def cpu_of(self, rid: int) -> float:
        with self._cond:
            return self._cpu.get(rid, 0.0)

    def signal(self, rid: int, sig: int, group: bool) -> None:
        """Signal child ``rid`` (its process group with ``group``), through the zygote."""
        if self.exit_status(rid) is not None:
            return
        line = json.dumps({"op": "signal", "id": rid, "sig": int(sig), "group": group})
        with self._lock:
            try:
                self.proc.stdin.write(line.encode() + b"\n")
                self.proc.stdin.flush()
            except (OSError, ValueError, AttributeError):
                pass  # the zygote is gone, and its children with it

    def spawn(self, env: dict[str, str], cwd: Path, fifos: Path):
        """Fork a worker into ``cwd``, talking through FIFOs made in the (trusted) folder
        ``fifos``; returns (process, requests writer, answers fd)."""
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
                if self.exit_status(rid) is not None or time.monotonic() > deadline:
                    requests_w = os.open(os.devnull, os.O_WRONLY)  # writes go nowhere; the read sees the crash
                    break
                time.sleep(0.001)
        os.set_blocking(requests_w, True)
        os.set_blocking(out_r, True)
        return (_ForkedWorker(self, rid, pid, os.fdopen(out_r, "rb")), os.fdopen(requests_w, "wb", buffering=0),
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
        if self._cwd is not None:
            shutil.rmtree(self._cwd, ignore_errors=True)

    def __enter__(self) -> "Zygote":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


# --- a zygote started before the CLI has loaded --------------------------------------------------

_spare: Zygote | None = None


def probes_of_exercise(number: int) -> str:
    """The probe modules exercise ``number``'s workers import: ``grader/exercises/exNN_*/probes.py``
    (and the shared ``grader/probes/``, which every worker imports;
    ``grader.sandbox.context.preload_probes``)."""
    return f"ex{number:02d}_"


def start_spare_zygote(probes: str) -> None:
    """Start a zygote for probes ``probes`` now (``grader.entry``: before the CLI imports the
    rest of the grader), for the grading that follows to take (``take_spare_zygote``); one
    nobody takes is closed when this process exits."""
    global _spare
    import atexit

    if _spare is not None:
        return
    try:
        _spare = Zygote(probes).start()
    except OSError:
        _spare = None
        return
    atexit.register(_close_spare)


def take_spare_zygote(probes: str) -> Zygote | None:
    """The zygote ``start_spare_zygote`` started, if it serves ``probes`` and is alive (the
    caller closes it); otherwise None (a spare that does not fit is closed now)."""
    global _spare
    zygote, _spare = _spare, None
    if zygote is None:
        return None
    if zygote.probes in (probes, "all") and zygote.alive:
        return zygote
    zygote.close()
    return None


def _close_spare() -> None:
    global _spare
    if _spare is not None:
        _spare.close()
        _spare = None
