"""The sandbox worker: the only process that runs learner code.

Started by ``grader.sandbox.client.Sandbox`` as ``python -m grader.sandbox.worker``.  It
sets its resource limits, imports JAX (device count already fixed through the
environment), imports the learner's module, then answers requests read from a private
pipe, one JSON line each::

    {"id": 3, "op": "call",  "target": "per_example_grad_norms", "args": [...], "kwargs": {...}}
    {"id": 4, "op": "probe", "target": "generic:count_compiles", "args": [...], "kwargs": {...}}

and answers ``{"id": 3, "ok": <plain data>}`` or ``{"id": 3, "error": {...}}``.  Every
answer passes through ``plaindata.to_plain``; the verdict is never decided here.

The learner's prints go to this process's stdout/stderr, which the client drains and
caps; the protocol uses two other file descriptors (``GRADER_PROTO_FDS``).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback

# Bind everything the harness needs *before* learner code runs, so that rebinding
# names in ``jax``/``numpy``/``json`` from the submission does not reach the harness.
import json
import resource


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


class _Channel:
    def __init__(self, rfd: int, wfd: int):
        # Move the protocol pipes away from low descriptor numbers learner code might reuse.
        self._r = os.fdopen(os.dup2(rfd, 1000, inheritable=False), "r", encoding="utf-8")
        self._w = os.fdopen(os.dup2(wfd, 1001, inheritable=False), "w", encoding="utf-8")
        os.close(rfd)
        os.close(wfd)

    def read(self):
        line = self._r.readline()
        return json.loads(line) if line else None

    def write(self, message: dict) -> None:
        self._w.write(json.dumps(message, allow_nan=False, separators=(",", ":")) + "\n")
        self._w.flush()


def _learner_traceback(exc: BaseException, learner_files: tuple[str, ...]) -> tuple[str, int | None]:
    """The traceback restricted to frames in the learner's files (what they can act on)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if os.path.abspath(f.filename) in learner_files]
    line = frames[-1].lineno if frames else None
    text = "".join(traceback.format_list(frames[-8:]))
    only = "".join(traceback.format_exception_only(type(exc), exc))
    text += only.split("\n--------------------")[0].rstrip() + "\n"  # drop JAX's frame-filtering notice
    return text[-4000:], line


def _error(kind: str, exc: BaseException | None, learner_files, **extra) -> dict:
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
    """Open, while still root, each folder Python imports from (``sys.path``, loaded
    packages' ``__path__``) that lies below a folder other users cannot enter: after the
    drop, the sandbox user could not reach it by name (a Python or virtual environment
    under ``/root`` or another closed folder)."""
    from grader.sandbox.user import deepest_closed_folder

    paths = [p for p in sys.path if p]
    for module in list(sys.modules.values()):
        search = getattr(module, "__path__", None)
        if search is not None:
            try:
                paths += [p for p in search if isinstance(p, str)]
            except TypeError:
                pass
    roots: dict[str, int] = {}
    for path in {os.path.abspath(p) for p in paths}:
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


def _reach_import_roots(roots: dict[str, int]) -> None:
    """After the drop: import from each folder the sandbox user cannot reach through the
    descriptor opened before it (``/proc/self/fd/N``: the kernel checks permissions from
    that folder down, not its parents).  Only the folders themselves become reachable, and
    only what their own permissions let any user read."""
    import importlib

    blocked = {}
    for root, fd in roots.items():
        if os.access(root, os.R_OK | os.X_OK):
            os.close(fd)
        else:
            blocked[root] = f"/proc/self/fd/{fd}"
    if not blocked:
        return
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
    import numpy as np  # noqa: F401
    import jax  # noqa: F401
    from grader import plaindata  # noqa: F401
    from grader.sandbox import context as _context

    _context.preload_probes()


def serve(chan: "_Channel") -> None:
    """Seal the grader, drop privileges (as root), import the learner's module when told
    to, then answer requests until told to stop."""
    from grader import plaindata
    from grader.sandbox import context as _context

    # An empty module path makes a clean worker: no learner code at all, for trusted
    # measurements that need a fresh JAX process of their own (see `Sandbox.clean`).
    module_path = os.path.abspath(os.environ["GRADER_MODULE_PATH"]) if os.environ["GRADER_MODULE_PATH"] else ""
    learner_files = (module_path,)
    roots = _hold_import_roots() if os.environ.get("GRADER_SANDBOX_UID") else {}
    _context.seal_grader()
    if os.environ.get("GRADER_SANDBOX_UID"):
        _drop_privileges(os.environ["GRADER_SANDBOX_UID"])
        _reach_import_roots(roots)
    die_with_parent()

    # Wait for the go-ahead: the trusted side first finishes loading its checks, so no
    # learner code runs while the check files are on disk.
    go = chan.read()
    if go is None or go.get("op") != "import":
        return

    # Import the learner's module.
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
        hello = {"id": 0, "ok": {"ready": True}}
    except _NoLearner:
        hello = {"id": 0, "ok": {"ready": True, "clean": True}}
    except SyntaxError as exc:
        hello = {"id": 0, "error": _error("syntax_error", exc, learner_files)}
    except NotImplementedError as exc:
        hello = {"id": 0, "error": _error("not_implemented", exc, learner_files)}
    except BaseException as exc:  # noqa: BLE001 - SystemExit included: a submission may not leave
        kind = "exit" if isinstance(exc, SystemExit) else "import_error"
        hello = {"id": 0, "error": _error(kind, exc, learner_files)}
    chan.write(hello)
    if "error" in hello:
        return

    ctx = _context.Context(module=module, module_path=module_path)
    while True:
        req = chan.read()
        if req is None or req.get("op") == "shutdown":
            return
        rid = req.get("id")
        try:
            args = plaindata.from_plain(req.get("args", []))
            kwargs = plaindata.from_plain(req.get("kwargs", {}))
            result = ctx.dispatch(req["op"], req["target"], args, kwargs)
            reply = {"id": rid, "ok": plaindata.to_plain(result)}
        except _context.MissingFunction as exc:
            reply = {"id": rid, "error": {"kind": "missing_function", "message": str(exc)}}
        except plaindata.NotPlainData as exc:
            reply = {"id": rid, "error": {"kind": "bad_return", "message": str(exc)}}
        except NotImplementedError as exc:
            reply = {"id": rid, "error": _error("not_implemented", exc, learner_files)}
        except SystemExit as exc:
            reply = {"id": rid, "error": _error("exit", exc, learner_files)}
        except MemoryError as exc:
            reply = {"id": rid, "error": _error("memory", exc, learner_files)}
        except BaseException as exc:  # noqa: BLE001 - report every failure as data
            reply = {"id": rid, "error": _error("exception", exc, learner_files)}
        try:
            chan.write(reply)
        except ValueError as exc:  # e.g. a value JSON cannot carry
            chan.write({"id": rid, "error": {"kind": "bad_return", "message": str(exc)}})


if __name__ == "__main__":
    main()
