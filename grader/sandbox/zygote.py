"""A zygote: one process that imports JAX once and forks a fresh sandbox worker on demand.

Starting a sandbox worker costs a Python start and a JAX import (about 0.6 s of CPU on
the reference machine), more than many exercises' grading itself.  ``grade batch`` starts
hundreds, so each of its grading processes keeps a zygote: a process that has imported
NumPy, JAX and the grader's probes -- and nothing else: it never runs learner code,
never compiles, and never initialises a JAX backend -- and forks a worker per sandbox.
The child is then exactly a worker that has done its imports: a fresh JAX with empty
caches, its own session, its own device count and compile-cache settings (applied through
``jax.config`` before any backend exists), its own resource limits, and, as root, the
same privilege drop (``grader.sandbox.worker.serve``).

Protocol, one JSON line each way on the zygote's stdin/stdout:

    -> {"op": "spawn", "id": 7, "env": {...}, "cwd": "/tmp/grade-sandbox-x", "fifos": "/tmp/grade-sandbox-x/.io"}
    <- {"id": 7, "pid": 12345}
    <- {"exit": 7, "status": -9, "cpu": 1.25}  # when child 7 ends (as Popen.returncode; CPU seconds used)
    -> {"op": "signal", "id": 7, "sig": 9, "group": true}

A child is named by its spawn id, never by its pid: once the zygote has reaped a child its
pid is free, and a long grading (``grade batch``, ``grade verify``) goes through every pid
the machine has, so a later child may get it.  For the same reason the zygote sends the
signals (``signal``): it sends one only to a child it has not reaped, whose pid therefore
cannot belong to anyone else yet.

The child talks to the trusted side through three FIFOs in ``fifos`` (``out``: its
stdout and stderr; ``requests`` and ``replies``: the worker protocol), which the client
creates in the sandbox's private folder.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys

OPEN_TIMEOUT_S = 60  # how long a new worker waits for the trusted side to open its FIFOs


def _apply_jax_config(env: dict[str, str]) -> None:
    """Settings a fresh worker reads from its environment when JAX starts: applied here
    through ``jax.config`` (JAX is imported already, no backend exists yet)."""
    import jax

    for key, raw in env.items():
        name = key.lower()
        if not key.startswith("JAX_") or key == "JAX_PLATFORMS" or name not in jax.config.values:
            continue
        current = jax.config.values[name]
        if isinstance(current, bool):
            value = raw.lower() in ("1", "true", "yes", "on")
        elif isinstance(current, int):
            value = int(raw)
        elif isinstance(current, float):
            value = float(raw)
        else:
            value = raw
        jax.config.update(name, value)


def _child(request: dict) -> None:
    """In the forked child: become a worker (never returns)."""
    from grader.sandbox import worker

    code = 0
    try:
        os.setsid()
        worker.die_with_parent()  # until the drop (which clears it; serve() asks again after it)
        signal.alarm(OPEN_TIMEOUT_S)  # a trusted side that never opens its ends must not strand us
        fifos = request["fifos"]
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)  # never the zygote's request pipe
        os.close(devnull)
        out = os.open(os.path.join(fifos, "out"), os.O_WRONLY)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        sys.stdin = open(os.devnull)
        sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
        # `requests` last: the trusted side takes a successful open of it as "ready"
        wfd = os.open(os.path.join(fifos, "replies"), os.O_WRONLY)
        rfd = os.open(os.path.join(fifos, "requests"), os.O_RDONLY)
        signal.alarm(0)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        _apply_jax_config(request["env"])
        worker._limit_resources()
        worker.serve(worker._Channel(rfd, wfd))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - the worker reports learner failures itself
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _status(raw: int) -> int:
    return -os.WTERMSIG(raw) if os.WIFSIGNALED(raw) else os.WEXITSTATUS(raw)


def _leave_start_folder() -> None:
    """Remove the private, empty folder this process started in (``Zygote.start``): it only
    kept anything planted from running at start-up, and removed here it is gone even when
    the trusted side is killed before it could clean up (each child works in its own box)."""
    start = os.environ.pop("GRADER_START_DIR", "")
    if start and os.path.realpath(os.getcwd()) == os.path.realpath(start):
        os.chdir("/")
        try:
            os.rmdir(start)
        except OSError:
            pass


def _signal(children: dict[int, int], request: dict) -> None:
    """Send a signal to a child not yet reaped (its pid is still its own), or to its
    process group (its session: the child called setsid)."""
    pid = next((p for p, rid in children.items() if rid == request.get("id")), None)
    if pid is None:
        return
    try:
        (os.killpg if request.get("group") else os.kill)(pid, int(request["sig"]))
    except (ProcessLookupError, PermissionError):
        pass


def main() -> None:
    from grader.sandbox import worker

    worker.die_with_parent()
    worker.import_harness()  # and out of the collector's sight (`worker.freeze_imports`)
    _leave_start_folder()
    stdin, stdout = sys.stdin.buffer, sys.stdout
    children: dict[int, int] = {}  # pid -> spawn id, until reaped
    buf = b""
    # a child's exit wakes the loop at once (the trusted side waits on it when it closes a sandbox)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    while True:
        ready, _, _ = select.select([stdin, wake_r], [], [], 1.0)
        if wake_r in ready:
            try:
                os.read(wake_r, 4096)
            except BlockingIOError:
                pass
            ready.remove(wake_r)
        while children:
            try:
                pid, raw, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            rid = children.pop(pid, None)
            if rid is None:
                continue
            cpu = round(usage.ru_utime + usage.ru_stime, 3)
            stdout.write(json.dumps({"exit": rid, "status": _status(raw), "cpu": cpu}) + "\n")
            stdout.flush()
        if not ready:
            continue
        chunk = os.read(stdin.fileno(), 65536)
        if not chunk:
            return  # the trusted side is gone; the children are in their own sessions and get killed by it
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            request = json.loads(line)
            if request.get("op") == "signal":
                _signal(children, request)
                continue
            if request.get("op") != "spawn":
                continue
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.close(wake_r)
                os.close(wake_w)
                _child(request)
            children[pid] = request["id"]
            stdout.write(json.dumps({"id": request["id"], "pid": pid}) + "\n")
            stdout.flush()


if __name__ == "__main__":
    main()
