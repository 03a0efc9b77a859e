"""The integrity guard: a PEP 578 audit hook over the learner's code.

Installed by the worker right before the learner's module loads (``install``), it cannot
be removed from Python.  From then on every audited operation of the process is judged:
what no exercise needs is *refused* (the operation raises ``PermissionError``) and
*recorded* as an integrity violation.  The worker reports the violations with every
answer; a violation makes the exercise's measured checks score 0 (``grader.runner``),
and the learner is told what their code did.

Refused once the learner's module starts loading:

* walking the garbage collector (``gc.get_objects``/``get_referrers``/``get_referents``),
  other threads' frames (``sys._current_frames``), tracing and profiling hooks, new
  audit hooks, ``io.open_code`` replacement;
* reaching a live stack frame (``sys._getframe``, a traceback's ``tb_frame``, a
  generator's or coroutine's frame) *on the learner's behalf*: allowed when the request
  comes from the grader's own code or from a third-party library working for it (JAX
  filtering a traceback), refused when the learner's code asks, directly or through the
  standard library (``inspect.stack()``);
* ``ctypes``, native extension modules from outside the Python installation, processes
  (subprocess, ``os.system``, ``os.fork``, ``os.kill``, ...), sockets, resource limits
  (``grader.sandbox.seccomp`` refuses the system calls themselves, too);
* files: writing anywhere but the sandbox's own folder (and the compile cache, when it is
  on); reading anything but the sandbox's folder, the Python installation and a few
  system files; opening folders outside the sandbox; relative paths with ``..``;
  links of any kind; reading the grader's own files or importing ``grader`` (except the
  source lines ``linecache`` reads for a traceback or a warning: JAX does that for every
  frame on the stack when an error passes through ``jit``);
* code that pretends to be a library's or the grader's: ``compile`` under the grader's
  file name at all, or under a library's with source that is not that file's, new code or function objects from such code,
  replacing a function's ``__code__``, ``marshal.loads`` of anything but a ``.pyc`` the
  import system just read, ``exec`` of a library's function code.  Compiles are
  attributed by where the traced code comes from (``grader.compiles``), so this keeps
  that attribution honest.

Where code comes from is decided by its file name (``Roots.kind``): the Python
installation (standard library, site-packages), the grader's read-only copy, or anything
else -- the learner.  Nothing the learner can do changes a code object's file name once
the spoofing routes above are closed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

LIBRARY, GRADER, LEARNER = "library", "grader", "learner"

#: Integrity reasons kept per worker, and the length of each.
MAX_REASONS, MAX_REASON_CHARS = 16, 240

_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
_REFUSED = {  # event (or prefix ending in ".") -> what the learner is told their code did
    "gc.get_objects": "searched the garbage collector for objects",
    "gc.get_referrers": "searched the garbage collector for objects",
    "gc.get_referents": "searched the garbage collector for objects",
    "sys._current_frames": "reached for other threads' stack frames",
    "sys._current_exceptions": "reached for other threads' exceptions",
    "sys.settrace": "installed a tracing hook",
    "sys.setprofile": "installed a profiling hook",
    "sys.monitoring.register_callback": "installed a monitoring hook",  # Python 3.12+
    "sys.addaudithook": "installed an audit hook",
    "setopencode": "replaced io.open_code",
    "ctypes.": "used ctypes to reach native code or memory",
    "socket.": "opened a network socket",
    "subprocess.Popen": "started a process",
    "os.system": "started a process",
    "os.exec": "started a process",
    "os.posix_spawn": "started a process",
    "os.spawn": "started a process",
    "os.fork": "started a process",
    "os.forkpty": "started a process",
    "pty.spawn": "started a process",
    "os.startfile": "started a process",
    "os.kill": "sent a signal to a process",
    "os.killpg": "sent a signal to a process",
    "signal.pthread_kill": "sent a signal to a thread",
    "resource.setrlimit": "changed its resource limits",
    "resource.prlimit": "changed its resource limits",
    "os.symlink": "made a link",
    "os.link": "made a link",
    "webbrowser.open": "opened a web browser",
    "urllib.Request": "opened a network connection",
    "http.client.connect": "opened a network connection",
    "sqlite3.connect": "opened a database file",
    "os.setxattr": "changed a file's extended attributes",
    "os.removexattr": "changed a file's extended attributes",
}
#: Path events: event -> (indexes of the path arguments, writes?)
_PATH_EVENTS = {
    "os.remove": ((0,), True), "os.rmdir": ((0,), True), "os.mkdir": ((0,), True),
    "os.rename": ((0, 1), True), "os.truncate": ((0,), True), "os.utime": ((0,), True),
    "os.chmod": ((0,), True), "os.chown": ((0,), True), "os.chflags": ((0,), True), "os.lchflags": ((0,), True),
    "os.listdir": ((0,), False), "os.scandir": ((0,), False), "glob.glob": ((0,), False),
    "os.chdir": ((0,), False),
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
#: Files outside the installation that Python, NumPy and JAX read at run time.
SYSTEM_READS = ("/dev/null", "/dev/urandom", "/dev/random", "/dev/zero", "/proc/cpuinfo", "/proc/meminfo",
                "/proc/self/stat", "/proc/self/status", "/proc/self/statm", "/proc/self/maps",
                "/proc/self/cgroup", "/sys/devices/system/cpu", "/sys/fs/cgroup", "/etc/localtime",
                "/usr/share/zoneinfo", "/etc/timezone", "/etc/os-release", "/usr/lib/os-release")


def _norm(path: str) -> str:
    return os.path.normpath(path)


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


class Roots:
    """Where code and files come from, fixed before the learner's code runs."""

    def __init__(self, *, sandbox: str, grader: str, library: Iterable[str], third_party: Iterable[str],
                 writable: Iterable[str] = (), readable: Iterable[str] = SYSTEM_READS):
        self.sandbox = _norm(sandbox)
        self.grader = _norm(grader)
        self.library = tuple(dict.fromkeys(_norm(p) for p in library if p))
        self.third_party = tuple(dict.fromkeys(_norm(p) for p in third_party if p))
        self.writable = (self.sandbox, *(_norm(p) for p in writable))
        self.readable = (*self.writable, *self.library, *(_norm(p) for p in readable))

    @classmethod
    def of_this_python(cls, *, sandbox: str, grader: str, extra_library: Iterable[str] = (),
                       writable: Iterable[str] = ()) -> "Roots":
        """The roots of the running interpreter: its standard library and site-packages
        (both as configured and with links resolved), plus ``extra_library`` (import
        folders the worker reaches through descriptors)."""
        import site
        import sysconfig

        paths = sysconfig.get_paths()
        stdlib = {paths[k] for k in ("stdlib", "platstdlib") if paths.get(k)}
        third = {paths[k] for k in ("purelib", "platlib") if paths.get(k)}
        try:
            third.update(site.getsitepackages())
        except AttributeError:  # pragma: no cover - a virtualenv without the function
            pass
        for p in sys.path:  # e.g. dist-packages, and the import folders a venv adds
            if p and os.path.isdir(p) and ("site-packages" in p or "dist-packages" in p):
                third.add(p)
        stdlib |= {os.path.realpath(p) for p in stdlib}
        third |= {os.path.realpath(p) for p in third}
        third |= set(extra_library)
        return cls(sandbox=sandbox, grader=grader, library=[*stdlib, *third], third_party=third,
                   writable=writable)

    def kind(self, filename: str) -> str:
        """Where code whose ``co_filename`` is ``filename`` comes from."""
        if filename.startswith("<frozen ") or filename in ("<built-in>", "<frozen>"):
            return LIBRARY
        f = _norm(filename)
        if _under(f, (self.grader,)):
            return GRADER
        if _under(f, self.library):
            return LIBRARY
        return LEARNER

    def third_party_file(self, filename: str) -> bool:
        return _under(_norm(filename), self.third_party)


def install(roots: Roots, violations: list, *, get_frame=sys._getframe, forbidden_code: Iterable[str] = ()) -> None:
    """Install the guard; refused operations append a reason to ``violations``.

    ``forbidden_code``: folders no module may be loaded from (a worker without JAX,
    ``grader.sandbox.nojax``, forbids the JAX packages': their native code is XLA).
    Everything the hook uses is bound here, before any learner code exists, and it lives
    only in the hook's closure: nothing the learner's code can reach refers to it.
    """
    import _thread

    local = _thread._local()
    get_ident = _thread.get_ident
    refused = dict(_REFUSED)
    refused_prefixes = tuple(k for k in refused if k.endswith("."))
    path_events = dict(_PATH_EVENTS)
    listing_events = frozenset({"os.listdir", "os.scandir", "glob.glob"})
    grader_import_folder = (os.path.dirname(roots.grader),)  # the sys.path entry of the grader's copy
    forbidden = tuple(_norm(p) for p in forbidden_code)
    frame_attrs = _FRAME_ATTRS
    isdir, isabs, getcwd, fsdecode = os.path.isdir, os.path.isabs, os.getcwd, os.fsdecode
    norm, join, realpath = os.path.normpath, os.path.join, os.path.realpath
    under, kind, third_party = _under, roots.kind, roots.third_party_file
    sandbox, grader, writable, readable = (roots.sandbox,), (roots.grader,), roots.writable, roots.readable
    last_pyc: dict[int, bytes] = {}  # thread -> the .pyc the import system opened last
    own_codes: set = set()  # the guard's own functions' code, skipped when looking for who asked
    import linecache

    display_codes = frozenset({linecache.updatecache.__code__})  # reads a file's lines to show them
    PermissionError_, OSError_, ValueError_ = PermissionError, OSError, ValueError

    def refuse(reason: str):
        reason = reason[:MAX_REASON_CHARS]
        if reason not in violations and len(violations) < MAX_REASONS:
            violations.append(reason)
        raise PermissionError_(f"refused by the grader's sandbox: your code {reason}")

    def who_asks() -> tuple[str, bool]:
        """(where the first code above the operation that is not the Python installation's
        comes from, whether a third-party library's code came before it)."""
        try:
            frame = get_frame(1)
        except ValueError_:  # an operation from C with no Python frame above it
            return LIBRARY, False
        while frame is not None and frame.f_code in own_codes:
            frame = frame.f_back
        via_third_party = False
        while frame is not None:
            filename = frame.f_code.co_filename
            k = kind(filename)
            if k != LIBRARY:
                return k, via_third_party
            via_third_party = via_third_party or third_party(filename)
            frame = frame.f_back
        return LIBRARY, via_third_party

    def display_read() -> bool:
        """Is this read linecache's, on behalf of a traceback or a warning that shows
        source lines (JAX extracts the whole stack, grader frames included, whenever an
        error passes through a transformation)?  Such text is shown, never run: compiling
        it under the grader's file name is refused below."""
        try:
            frame = get_frame(1)
        except ValueError_:
            return False
        while frame is not None:
            code = frame.f_code
            if code in display_codes:
                return True
            if code not in own_codes and kind(code.co_filename) != LIBRARY:
                return False
            frame = frame.f_back
        return False

    def learner_asks() -> bool:
        k, via_third_party = who_asks()
        return k == LEARNER and not via_third_party

    def resolve(path) -> str | None:
        if isinstance(path, bytes):
            path = fsdecode(path)
        if not isinstance(path, str):
            return None
        if not isabs(path):
            if ".." in path.replace("\\", "/").split("/"):
                refuse(f"used a relative path with '..': {path}")
            path = join(getcwd(), path)
        return norm(path)

    def check_path(path, write: bool, what: str, listing: bool = False) -> str | None:
        if isinstance(path, int):  # a descriptor it already holds
            return None
        p = resolve(path)
        if p is None:
            return None
        if write:
            if not under(p, writable):
                refuse(f"{what} outside its sandbox folder: {p}")
        elif listing and (under(p, grader) or p in grader_import_folder):
            pass  # names only, and public ones: importers scan every folder on sys.path (SciPy does)
        elif under(p, grader):
            shown = p.endswith(".py") and display_read()  # source lines for a traceback, never a .pyc
            if who_asks()[0] != GRADER and not shown:  # the grader's own tracebacks read its files
                refuse(f"read the grader's own files: {p}")
        elif not under(p, readable):
            refuse(f"{what} outside its sandbox folder: {p}")
        return p

    def on_open(args) -> None:
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        write = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                (isinstance(flags, int) and bool(flags & _WRITE_FLAGS))
        p = check_path(path, write, "wrote" if write else "read a file")
        if p is None:
            return
        if not write and not under(p, sandbox) and isdir(p) and learner_asks():
            refuse(f"opened a folder outside its sandbox folder: {p}")
        if p.endswith(".pyc"):  # what marshal.loads may load next (see "marshal.loads")
            try:
                with open(p, "rb") as fh:
                    last_pyc[get_ident()] = fh.read()
            except OSError_:
                last_pyc.pop(get_ident(), None)

    def same_as_file(source, filename: str) -> bool:
        try:
            with open(filename, "rb") as fh:
                data = fh.read()
        except OSError_:
            return False
        if isinstance(source, str):
            return data.decode("utf-8", "replace") == source
        return data == bytes(source)

    def spoofs(filename) -> bool:
        return isinstance(filename, str) and kind(filename) != LEARNER

    def judge(event: str, args) -> None:
        if event == "object.__getattr__":
            if len(args) > 1 and args[1] in frame_attrs and learner_asks():
                refuse("reached for a live stack frame (a traceback's or a generator's frame)")
        elif event == "sys._getframe":
            if learner_asks():
                refuse("reached for a live stack frame (sys._getframe, inspect.stack, ...)")
        elif event == "open":
            on_open(args)
        elif event in path_events:
            indexes, write = path_events[event]
            if event == "os.chdir" and args and isinstance(args[0], int):
                refuse("changed folder through a descriptor")
            for i in indexes:
                if i < len(args):
                    check_path(args[i], write, "changed a file" if write else "looked into a folder",
                               listing=event in listing_events)
        elif event == "import":
            name = args[0] if args else ""
            if isinstance(name, str) and (name == "grader" or name.startswith("grader.")):
                refuse("imported the grader's own modules")
            filename = args[1] if len(args) > 1 else None
            if isinstance(filename, str) and filename.endswith((".so", ".pyd", ".dylib")) and kind(filename) != LIBRARY:
                refuse(f"loaded a native extension from outside the Python installation: {filename}")
            if forbidden and isinstance(filename, str) and (under(norm(filename), forbidden)
                                                            or under(realpath(filename), forbidden)):
                refuse(f"loaded JAX where it must not run: {filename}")
        elif event == "compile":
            source, filename = (tuple(args) + (None, None))[:2]
            if isinstance(filename, str) and kind(filename) == GRADER and who_asks()[0] != GRADER:
                refuse(f"compiled code under the grader's file name ({filename})")
            if spoofs(filename) and not (isinstance(source, (str, bytes)) and same_as_file(source, filename)):
                refuse(f"compiled code under a library's or the grader's file name ({filename})")
        elif event == "code.__new__":
            if spoofs(args[1] if len(args) > 1 else None):
                refuse(f"made a code object that claims to come from {args[1]}")
        elif event == "function.__new__":
            filename = getattr(args[0], "co_filename", None) if args else None
            if spoofs(filename):
                refuse(f"made a function from the code of {filename}")
        elif event == "object.__setattr__":
            if len(args) > 1 and args[1] == "__code__":
                refuse("replaced a function's code")
        elif event == "marshal.loads":
            data = args[0] if args else None
            pyc = last_pyc.get(get_ident())
            if not isinstance(data, (bytes, bytearray)) or not data or pyc is None or not pyc.endswith(bytes(data)):
                refuse("loaded code with marshal")
        elif event == "exec":
            code = args[0] if args else None
            if spoofs(getattr(code, "co_filename", None)) and getattr(code, "co_name", "") != "<module>":
                refuse(f"ran a library's or the grader's function code ({code.co_filename})")
        else:
            reason = refused.get(event)
            if reason is None and event.startswith(refused_prefixes):
                reason = next(refused[p] for p in refused_prefixes if event.startswith(p))
            if reason is not None:
                refuse(reason)

    def hook(event: str, args) -> None:
        if event == "builtins.id" or getattr(local, "busy", False):
            return
        local.busy = True
        try:
            judge(event, args)
        finally:
            local.busy = False

    for fn in (refuse, who_asks, display_read, learner_asks, resolve, check_path, on_open, same_as_file, spoofs, judge, hook):
        own_codes.add(fn.__code__)
    sys.addaudithook(hook)
