"""The sandbox worker: the only process that runs learner code.

Started by ``grader.sandbox.client.Sandbox`` (``python -s -P`` with a private working
folder and an environment of its own: see ``client.worker_command``), or forked by a
zygote (``grader.sandbox.zygote``).  It imports NumPy, JAX and the grader's probes, fixes
its resource limits and, as root, drops to the sandbox's own user.  Then it waits for the
trusted side's go-ahead, installs the integrity guard (``grader.sandbox.guard``) and the
seccomp filter (``grader.sandbox.seccomp``), and only then imports the learner's module.

Two threads
-----------
* The **main thread** is the trusted endpoint.  It reads requests from a private pipe,
  hands them to the learner thread, and writes each answer with a header of its own --
  the request id, how many times JAX compiled and traced while it ran (``Meter``, read
  from JAX's C++ caches), and the integrity violations so far -- authenticated with an
  HMAC whose key the trusted side sent before any learner code existed.  It never runs
  learner code, never touches an object the learner made, and, once the learner's code
  is loaded, looks no name up at run time (everything it calls is bound in advance), so
  neither a rebound builtin nor a monkeypatched class can make it run the learner's code.
  Before each answer it also compares the grader's own modules with the snapshot taken
  before the learner's module loaded (``grader.sandbox.namespaces``): a change is an
  accusation.
* The **learner thread** imports the learner's module and answers requests: ``call``
  (run a learner function) and ``probe`` (run a measuring function from the exercise's
  ``grader/exercises/exNN_*/probes.py`` or the shared ``grader/probes/`` beside the
  learner's code).  Its answers pass through
  ``plaindata.to_plain`` (exact types, at most ``plaindata.MAX_ANSWER_ELEMENTS`` elements:
  a bigger answer is refused here, kind ``answer_too_large``, before it costs the trusted
  side anything); the verdict is never decided here.

A line the learner's code writes to the answer pipe itself fails the HMAC, and the
trusted side counts it as an integrity violation (it can neither read the key, which
lives only in the main thread's frame, nor reach that frame from its own thread).

Wire format (bytes, one line each; the trusted side speaks first)::

    -> HELLO <hex key>            (before anything else)
    -> IMPORT                     (when the checks are loaded: import the learner's module)
    -> <id> <json request>        {"op": "call"|"probe", "target": ..., "args": [...], "kwargs": {...}}
    <- <hmac hex> <header length> <header json><body json>
       header: {"id": n, "compiles": n, "traces": n, "unmeasured": "" | why,
                "integrity": [{"kind", "file", "line"[, "what"]}, ...], (every accusation so far)
                "refused": [{"kind", "detail", "file", "line"}, ...]}  (quiet refusals since the last answer)
       body:   {"ok": <plain data>} or {"error": {...}}        (id 0 answers IMPORT)

The learner's prints go to this process's stdout/stderr, which the client drains and
caps.
"""

from __future__ import annotations

import errno
import importlib
import importlib.util
import os
import sys
import traceback

import json
import resource

FD_REQUESTS, FD_ANSWERS = 1000, 1001  # protocol descriptors, away from the low numbers code reuses
MAX_LINE = 64 << 20


def _limit_resources() -> None:
    mb = int(os.environ.get("GRADER_MEMORY_MB", "0") or 0)
    if mb > 0:
        resource.setrlimit(resource.RLIMIT_AS, (mb << 20, mb << 20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # A backstop for when nobody is left to enforce the time budget (the grader was killed):
    # the kernel ends a worker that has used this much CPU, whatever its code does.
    cpu_s = int(os.environ.get("GRADER_CPU_LIMIT_S", "0") or 0)
    if cpu_s > 0:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))


def die_with_parent() -> None:
    """Ask the kernel to kill this process when its parent ends (Linux), so a grader killed
    mid-grading leaves no worker behind.  Changing user clears the request: call it after
    the privilege drop.  Elsewhere it does nothing (the CPU limit still applies)."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(1, int(signal.SIGKILL), 0, 0, 0) != 0:  # PR_SET_PDEATHSIG
            return
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent ended before the request was made
        os._exit(1)


def _nproc_limit() -> None:
    """As root, the sandbox's user is the grader's own: cap its threads and processes (the
    seccomp filter refuses new processes anyway; JAX's thread pools stay well below)."""
    try:
        resource.setrlimit(resource.RLIMIT_NPROC, (1024, 1024))
    except (ValueError, OSError):
        pass


def _file_limits() -> None:
    # no one file may be larger than everything the sandbox may write (grader.sandbox.disk)
    fsize = min(256, int(os.environ.get("GRADER_DISK_MB") or 256)) << 20
    for which, value in ((resource.RLIMIT_FSIZE, fsize), (resource.RLIMIT_NOFILE, 1024)):
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass


def _no_network() -> None:
    """As root, a network namespace of its own with no interface but a down loopback (the
    seccomp filter refuses sockets too; this holds even where seccomp is unavailable)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).unshare(0x40000000)  # CLONE_NEWNET
    except (OSError, AttributeError):
        pass


class _Channel:
    """Raw, line-based access to the two protocol descriptors (moved to FD_REQUESTS and
    FD_ANSWERS).  Used by the trusted phase; the main thread's serving loop binds the same
    calls as locals."""

    def __init__(self, rfd: int, wfd: int):
        os.dup2(rfd, FD_REQUESTS, inheritable=False)
        os.dup2(wfd, FD_ANSWERS, inheritable=False)
        if rfd != FD_REQUESTS:
            os.close(rfd)
        if wfd != FD_ANSWERS:
            os.close(wfd)
        self.buf = b""

    def readline(self) -> bytes | None:
        while b"\n" not in self.buf:
            chunk = os.read(FD_REQUESTS, 1 << 20)
            if not chunk:
                return None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line


def _learner_traceback(exc: BaseException, learner_files: tuple[str, ...]) -> tuple[str, int | None]:
    """The traceback restricted to frames in the learner's files (what they can act on)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if os.path.abspath(f.filename) in learner_files]
    line = frames[-1].lineno if frames else None
    text = "".join(traceback.format_list(frames[-8:]))
    only = "".join(traceback.format_exception_only(type(exc), exc))
    text += only.split("\n--------------------")[0].rstrip() + "\n"  # drop JAX's frame-filtering notice
    return text[-4000:], line


_DISK_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))


def _raised_in(exc: BaseException, learner_files: tuple[str, ...]) -> bool:
    """Whether the innermost frame of ``exc``'s traceback is in the learner's files."""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and os.path.abspath(frames[-1].filename) in learner_files


def _error(kind: str, exc: BaseException | None, learner_files, **extra) -> dict:
    if kind in ("exception", "import_error") and isinstance(exc, OSError) and exc.errno in _DISK_FULL:
        kind = "disk"  # the sandbox's folder is full: its budget (grader.sandbox.disk), not a bug to debug
    if kind == "not_implemented" and exc is not None and not _raised_in(exc, learner_files):
        # raised by a library (JAX has no transpose rule for an operation, say), not the stub's TODO:
        # the learner's code ran, and what JAX says is what they need to read
        kind = "exception"
    err = {"kind": kind, **extra}
    if exc is not None:
        err["type"] = type(exc).__name__
        try:
            err["message"] = str(exc)[:2000]
        except Exception:
            err["message"] = "<unprintable exception>"
        err["traceback"], err["line"] = _learner_traceback(exc, learner_files)
        if isinstance(exc, SyntaxError):
            err["line"] = exc.lineno
            err["text"] = (exc.text or "").rstrip()[:300]
    return err


def _hold_import_roots() -> dict[str, int]:
    """Open, while still root, each folder of the Python installation that Python imports
    from (its standard library and site-packages, on ``sys.path`` or in loaded packages'
    ``__path__``) and that lies below a folder other users cannot enter: after the drop,
    the sandbox user could not reach it by name (a Python or virtual environment under
    ``/root``, or in a private checkout).  Only the installation's folders are held -- never
    a course checkout that an editable install puts on the import path."""
    import sysconfig

    from grader.sandbox.guard import _under
    from grader.sandbox.user import deepest_closed_folder

    config = sysconfig.get_paths()
    install = {os.path.abspath(config[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib") if config.get(k)}
    install |= {os.path.realpath(p) for p in install}
    paths = [p for p in sys.path if p]
    for module in list(sys.modules.values()):
        search = getattr(module, "__path__", None)
        if search is not None:
            try:
                paths += [p for p in search if isinstance(p, str)]
            except TypeError:
                pass
    roots: dict[str, int] = {}
    for path in {os.path.abspath(p) for p in paths if _under(os.path.abspath(p), install)}:
        closed = deepest_closed_folder(path) if os.path.isdir(path) else None
        if closed is None:
            continue
        # the folder just below the closed one, on the way to `path`
        entry = os.path.join(str(closed), os.path.relpath(path, closed).split(os.sep)[0])
        if entry in roots or not os.path.isdir(entry):
            continue
        try:
            roots[entry] = os.open(entry, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            pass
    return roots


def _reach_import_roots(roots: dict[str, int]) -> list[str]:
    """After the drop: import from each folder the sandbox user cannot reach through the
    descriptor opened before it (``/proc/self/fd/N``: the kernel checks permissions from
    that folder down, not its parents).  Only the folders themselves become reachable, and
    only what their own permissions let any user read.  Returns the ``/proc/self/fd/N``
    prefixes now in use (the guard counts code and files under them as the installation's)."""
    import importlib

    blocked = {}
    for root, fd in roots.items():
        if os.access(root, os.R_OK | os.X_OK):
            os.close(fd)
        else:
            blocked[root] = f"/proc/self/fd/{fd}"
    if not blocked:
        return []
    ordered = sorted(blocked.items(), key=lambda kv: -len(kv[0]))

    def remap(path):
        if not isinstance(path, str):
            return path
        full = os.path.abspath(path) if path else path
        for root, via in ordered:
            if full == root or full.startswith(root + os.sep):
                return via + full[len(root):]
        return path

    sys.path[:] = [remap(p) for p in sys.path]
    for module in list(sys.modules.values()):
        search = getattr(module, "__path__", None)
        if isinstance(search, list):
            search[:] = [remap(p) for p in search]
        elif search is not None and isinstance(getattr(search, "_path", None), list):  # a namespace package
            search._path[:] = [remap(p) for p in search._path]
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    return list(blocked.values())


def _drop_privileges(spec: str) -> None:
    """Become the unprivileged sandbox user for good, or stop: never run learner code as root."""
    uid, gid = (int(x) for x in spec.split(":"))
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    try:
        os.setuid(0)
    except PermissionError:
        return
    raise SystemExit("the sandbox could not drop root privileges; refusing to run learner code")


class _NoLearner(Exception):
    pass


class _NoMeter:
    """A worker without JAX compiles and traces nothing: its meter reads zeros."""

    def read(self) -> dict[str, int]:
        return {"compiles": 0, "traces": 0}

    def status(self) -> bytes:
        return b'""'

    def accusations(self) -> list[bytes]:
        return []


def main() -> None:
    die_with_parent()  # until the drop, which clears it; serve() asks again after it
    _limit_resources()
    rfd, wfd = (int(x) for x in os.environ["GRADER_PROTO_FDS"].split(","))
    chan = _Channel(rfd, wfd)
    import_harness()
    serve(chan)


def import_harness() -> None:
    """Heavy imports happen before the learner's code: their bindings are ours.  A zygote
    (``grader.sandbox.zygote``) does this once and forks a worker per sandbox."""
    import faulthandler  # noqa: F401
    import hashlib  # noqa: F401
    import _hashlib  # noqa: F401
    import _json  # noqa: F401
    import _queue  # noqa: F401
    import _thread  # noqa: F401
    import ctypes  # noqa: F401 - imported now: importing it later loads native code (refused)
    # imported now: at import, asyncio's modules make coroutine code objects (types.coroutine),
    # which the guard refuses once learner code may run; equinox needs both (through jaxtyping)
    import asyncio  # noqa: F401
    import unittest.mock  # noqa: F401

    import numpy as np  # noqa: F401

    from grader import coverage, plaindata  # noqa: F401
    from grader.sandbox import context as _context
    from grader.sandbox import guard, namespaces, seccomp  # noqa: F401

    if os.environ.get("GRADER_NO_JAX") == "1":  # a worker without JAX (grader.sandbox.nojax)
        from grader.sandbox import nojax  # noqa: F401
        freeze_imports()
        return
    import jax  # noqa: F401

    from grader import compiles  # noqa: F401
    from grader.sandbox import meter  # noqa: F401

    _context.preload_probes(os.environ.get("GRADER_PROBES", "all"))
    from grader.sandbox import freeze

    # the libraries' own code frozen too (grader.sandbox.freeze.library): a JAX function that calls
    # another through its module no longer finds a replacement the learner put there.  Before the
    # guard's frame consumers are built: it knows them by code object.
    freeze.freeze(*freeze.library())
    from grader.sandbox import pins

    pins.prepare()  # JAX's primitives and rule tables, read once for every worker
    guard.prepare()  # the frame consumers, built once from the live objects (a zygote's workers share them)
    freeze.prepare(namespaces.grader_code(_grader_modules())[0])  # the grader's code parsed once, likewise
    freeze_imports()


def freeze_imports() -> None:
    """Move every object made so far (the imports: JAX's hundreds of thousands of objects)
    out of the garbage collector's sight, into its permanent generation.  They live as long
    as the process, so collecting never frees one; now a collection in the worker no longer
    walks them all (with a zygote, nor writes to the pages its children share with it, which
    forces a copy of each).  Measured on ``grade verify 1 6 --seeds 2``: 15-20% less sandbox
    CPU.  Nothing of the grader finds objects through the collector after this
    (``freeze.library`` ran before), and the learner's code may not (``grader.sandbox.guard``)."""
    import gc

    gc.freeze()


def _grader_modules() -> dict:
    """The grader's modules loaded in this process, by name."""
    return {n: m for n, m in sys.modules.items() if n == "grader" or n.startswith("grader.")}


def serve(chan: _Channel) -> None:
    """The trusted phase, then the two threads (see the module docstring)."""
    import faulthandler
    import signal

    from grader.sandbox import context as _context
    from grader.sandbox import disk, freeze, guard, namespaces, pins, seccomp

    hello = chan.readline()
    if not hello or not hello.startswith(b"HELLO "):
        return
    key = bytes.fromhex(hello[6:].decode("ascii"))
    module_path = os.path.abspath(os.environ["GRADER_MODULE_PATH"]) if os.environ.get("GRADER_MODULE_PATH") else ""
    sandbox_dir = os.environ.get("GRADER_SANDBOX_DIR") or (os.path.dirname(module_path) if module_path else os.getcwd())
    if os.environ.get("GRADER_SANDBOX_UID") and not os.environ.get(disk.NO_TMPFS_ENV):
        # first, while this process has one thread: every thread made later shares the namespace
        uid, gid = (int(x) for x in os.environ["GRADER_SANDBOX_UID"].split(":"))
        disk.private_tmpfs(sandbox_dir, uid, gid, int(os.environ.get("GRADER_DISK_MB") or disk.SANDBOX_DISK_MB))

    no_jax = os.environ.get("GRADER_NO_JAX") == "1"
    if no_jax:  # nothing of JAX is ever loaded here (grader.sandbox.nojax)
        from grader.sandbox import nojax

        _context.preload_probes(os.environ.get("GRADER_PROBES", "all"), jax=False)  # JAX-free probes only
        meter = _NoMeter()
    else:
        from grader.sandbox.meter import Meter

        _context.preload_probes(os.environ.get("GRADER_PROBES", "all"))  # forked: what the zygote left out
        if os.environ.get("JAX_ENABLE_COMPILATION_CACHE") == "true":
            from grader import jaxcompat

            jaxcompat.atomic_compile_cache_writes()  # before the first compile (the meter's sentinel)
        meter = Meter(sandbox_dir)  # starts JAX's backend and plants its sentinels, before any learner code
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)  # "where was it?" on a timeout
    root = bool(os.environ.get("GRADER_SANDBOX_UID"))
    if root:
        _no_network()
    roots = _hold_import_roots() if root else {}
    if root:
        _drop_privileges(os.environ["GRADER_SANDBOX_UID"])
        remapped = _reach_import_roots(roots)
        _nproc_limit()
    else:
        remapped = []
    die_with_parent()
    _file_limits()
    # where the JAX packages lie, as this user now reaches them (real paths: the guard resolves links)
    forbidden = nojax.real_package_folders() if no_jax else []
    grader_dir = os.path.dirname(os.path.dirname(os.path.abspath(_context.__file__)))
    writable = [p for p in os.environ.get("GRADER_WRITABLE", "").split(os.pathsep) if p]
    guard_roots = guard.Roots.of_this_python(sandbox=sandbox_dir, grader=grader_dir, extra_library=remapped,
                                             writable=writable)

    # Wait for the go-ahead: the trusted side first finishes loading its checks, so no
    # learner code runs while the check files are on disk.
    if chan.readline() != b"IMPORT":
        return
    import logging

    from grader import plaindata

    # The persistent compile cache is the grader's, not the learner's: JAX's lines about it
    # ("Persistent compilation cache hit ...", shown when jax_log_compiles is on) are not
    # something their code printed.
    for name in ("jax._src.compiler", "jax._src.compilation_cache", "jax._src.cache_key"):
        logging.getLogger(name).addFilter(lambda record: "persistent" not in str(record.msg).lower())
    violations: list[bytes] = []  # accusations (JSON objects), from the guard
    refusals: list[bytes] = []  # quiet refusals (JSON objects), from the guard
    grader_modules = _grader_modules()
    _context.seal_grader()
    if no_jax:
        nojax.install()
    seccomp.install()  # before the guard, which refuses ctypes
    # the grader's global reads become constants: a name rebound in its modules changes nothing
    # it calls, even when put back before the snapshot below is compared (grader.sandbox.freeze)
    rules = []
    if not no_jax:  # JAX's classes and primitive names the probes read: pinned, then frozen in (grader.sandbox.pins)
        rules = pins.pin(grader_modules)["rules"]
    functions, classes = namespaces.grader_code(grader_modules)
    freeze.freeze(grader_modules, functions)
    freeze.seal(classes)  # and a grader class's attributes can no longer be set, even for a moment
    del functions, classes
    guard.install(guard_roots, violations, refusals, trusted_codes=(_answer_loop.__code__,), forbidden_code=forbidden)
    # the grader's modules as they are now, compared after every request (their objects stay
    # reachable through the class graph: grader.sandbox.namespaces)
    # and JAX's rules for its own primitives (grader.sandbox.pins.rule_tables)
    watch = namespaces.Watch(grader_modules, sandbox_dir, rules)
    del grader_modules, rules
    _serve_requests(chan.buf, key, meter, watch.changes, violations, refusals, module_path, plaindata, _context,
                    guard_roots)


def _serve_requests(pending: bytes, key: bytes, meter, grader_changes, violations: list, refusals: list,
                    module_path: str, plaindata, context, roots) -> None:
    """Start the learner thread and answer requests until the pipe closes (main thread).

    Everything the loop calls is bound here, as locals, before the learner thread starts;
    the loop itself looks up no global or builtin name (``tests/test_sandbox.py`` checks
    its bytecode)."""
    import _hashlib
    import _json
    import _queue
    import _thread

    import time

    inbox, outbox = _queue.SimpleQueue(), _queue.SimpleQueue()
    clock = time.process_time  # bound now: the learner's code may rebind the module's
    _thread.start_new_thread(_learner_thread, (inbox, outbox, module_path, plaindata, context, roots, clock, clock()))
    _answer_loop(pending, key, meter, grader_changes, violations, refusals, inbox.put, outbox.get, os.read, os.write,
                 _hashlib.hmac_digest, b",".join, int, len, ValueError, OSError, FD_REQUESTS, FD_ANSWERS, MAX_LINE)


def _answer_loop(pending, key, meter, grader_changes, violations, refusals, to_learner, from_learner, read, write,
                 hmac_digest, join, int_, len_, ValueError_, OSError_, fd_in, fd_out, max_line) -> None:
    meter_read, meter_accusations, meter_status = meter.read, meter.accusations, meter.status
    buf = pending
    sent = 0  # refusals already reported
    first = True
    while True:
        if first:  # the IMPORT answer (id 0) comes without a request
            rid, payload, first = 0, b"", False
        else:
            while b"\n" not in buf:
                try:
                    chunk = read(fd_in, 1048576)
                except OSError_:
                    return
                if not chunk or len_(buf) > max_line:
                    return
                buf += chunk
            line, _, buf = buf.partition(b"\n")
            head, _, payload = line.partition(b" ")
            try:
                rid = int_(head)
            except ValueError_:
                continue
        before = meter_read()
        to_learner((rid, payload))
        got = from_learner()
        after = meter_read()
        body = got[1]
        if got[0] != rid or b"\n" in body:  # only code that reached the learner thread's queue does that
            violations.append(b'{"kind":"answer_pipe","file":"","line":0}')
            body = b'{"error":{"kind":"crashed","message":"the sandbox answered out of turn"}}'
        fresh = refusals[sent:]
        sent += len_(fresh)
        header = b'{"id":%d,"compiles":%d,"traces":%d,"unmeasured":%s,"integrity":[%s],"refused":[%s]}' % (
            rid, after["compiles"] - before["compiles"], after["traces"] - before["traces"], meter_status(),
            join(violations + meter_accusations() + grader_changes()), join(fresh))
        mac = hmac_digest(key, header + b"\n" + body, "sha256").hex().encode("ascii")
        out = mac + b" %d " % len_(header) + header + body + b"\n"
        try:
            while out:
                out = out[write(fd_out, out):]
        except OSError_:
            return


def _learner_thread(inbox, outbox, module_path: str, plaindata, _context, roots, clock, start_cpu_s: float) -> None:
    """Import the learner's module, then answer requests (the learner thread).  The
    grader's modules come as arguments: importing them now would be refused.

    The answer to IMPORT also says how much CPU the worker's start-up took (``start_cpu_s``:
    since the process began, or since the fork from a zygote, up to the learner thread) and
    the import of the learner's module (``import_cpu_s``): where a grading's fixed costs go
    (``grade exercise -v``, ``grade verify``).  Only timings: nothing is judged by them."""
    learner_files = (module_path,)
    rid, _ = inbox.get()
    import_started = clock()
    name = os.path.splitext(os.path.basename(module_path))[0]
    module = None
    try:
        if not module_path:
            raise _NoLearner
        sys.path.insert(0, os.path.dirname(module_path))
        spec = importlib.util.spec_from_file_location(name, module_path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        hello = {"ok": {"ready": True}}
    except _NoLearner:
        hello = {"ok": {"ready": True, "clean": True}}
    except SyntaxError as exc:
        hello = {"error": _error("syntax_error", exc, learner_files)}
    except NotImplementedError as exc:
        hello = {"error": _error("not_implemented", exc, learner_files)}
    except BaseException as exc:  # noqa: BLE001 - SystemExit included: a submission may not leave
        kind = "exit" if isinstance(exc, SystemExit) else "import_error"
        hello = {"error": _error(kind, exc, learner_files)}
    if "ok" in hello:
        hello["ok"].update(start_cpu_s=round(start_cpu_s, 4), import_cpu_s=round(clock() - import_started, 4))
    outbox.put((rid, _encode(hello)))
    if "error" in hello:
        return

    ctx = _context.Context(module=module, module_path=module_path, roots=roots,
                           jax_arrays=os.environ.get("GRADER_NO_JAX") != "1")
    while True:
        rid, payload = inbox.get()
        try:
            req = json.loads(payload)
            args = plaindata.from_plain(req.get("args", []))
            kwargs = plaindata.from_plain(req.get("kwargs", {}))
            result = ctx.dispatch(req["op"], req["target"], args, kwargs)
            reply = {"ok": plaindata.to_plain(result, max_elements=plaindata.MAX_ANSWER_ELEMENTS)}
        except _context.MissingFunction as exc:
            reply = {"error": {"kind": "missing_function", "message": str(exc)}}
        except plaindata.TooManyValues as exc:
            reply = {"error": {"kind": "answer_too_large", "message": str(exc)[:500]}}
        except plaindata.NotPlainData as exc:
            reply = {"error": {"kind": "bad_return", "message": str(exc)}}
        except NotImplementedError as exc:
            reply = {"error": _error("not_implemented", exc, learner_files)}
        except SystemExit as exc:
            reply = {"error": _error("exit", exc, learner_files)}
        except MemoryError as exc:
            reply = {"error": _error("memory", exc, learner_files)}
        except BaseException as exc:  # noqa: BLE001 - report every failure as data
            reply = {"error": _error("exception", exc, learner_files)}
        outbox.put((rid, _encode(reply)))


def _encode(reply: dict) -> bytes:
    try:
        return json.dumps(reply, allow_nan=False, separators=(",", ":")).encode("utf-8")
    except (ValueError, TypeError) as exc:  # e.g. a value JSON cannot carry
        return json.dumps({"error": {"kind": "bad_return", "message": str(exc)[:500]}}).encode("utf-8")


if __name__ == "__main__":
    main()
