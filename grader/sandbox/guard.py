"""The integrity guard: a PEP 578 audit hook over the learner's code, with three outcomes.

Design note
-----------
An ``integrity`` verdict accuses a person of cheating, so it must be as trustworthy as a
full mark.  What keeps files, network and processes out of reach is isolation by
construction -- a separate process, a separate user when the grader is root, seccomp
(``grader.sandbox.seccomp``), a network namespace, resource limits, a private folder --
not this hook.  The hook is installed by the worker right before the learner's module
loads (it cannot be removed) and judges every audited operation of the process.  Each
reaches one of three outcomes (the words are in ``grader.sandbox.outcomes``):

1. **allow** -- harmless actions: ``socket.gethostname``, platform queries, reading and
   writing the learner's own folder and temporary folder, reading the Python
   installation, and library code that looks at its caller's frame only to read a module
   name or a line number (``typing``, ``enum``, ``collections.namedtuple``, logging's
   ``findCaller``, ``traceback``'s stack extraction, JAX's traceback filtering: the
   *consumers* of ``grader.sandbox.frames``).
2. **refuse quietly** -- what isolation already makes harmless, or what no exercise needs:
   starting a process, opening a socket, writing outside the sandbox, reading outside it,
   ctypes, walking the garbage collector, tracing hooks, importing the grader, and a live
   frame handed to code that is not a consumer (``inspect.currentframe()``,
   ``inspect.stack()``, ``traceback.walk_tb``).  The operation raises an ordinary
   ``PermissionError`` (``ImportError`` for an import) whose message says what to do
   instead; a library that handles it (``platform`` running ``uname``, matplotlib asking
   ``fc-list``) just works.  The refusal is reported with the next answer -- never as a
   violation -- so a check it cost can repeat the message in its feedback.
3. **accuse** -- only what no honest code does and what is aimed at the grader or its
   meter: code or function objects that claim the grader's or a library's file name,
   replacing a function's ``__code__`` with code from elsewhere, running a library
   function's code object directly, holding one of the grader's own frames.  (Forging
   the answer channel and rebinding the JAX cache functions the meter reads are caught
   on the trusted side and by ``grader.sandbox.meter``.)  The operation is refused too,
   and the violation carries its evidence: the learner's file and line.

Frames
------
CPython 3.11 audits how a frame is obtained (``sys._getframe``, ``tb_frame``,
``gi_frame``/``cr_frame``/``ag_frame``, ``f_code``) but not ``f_back``, ``f_globals`` or
``f_locals``: any frame in the learner's hands walks up to the probe's frames.  A request
is allowed when a consumer stands between the operation and the first code that is not
the installation's (the learner's or the grader's), or when no such code is on the stack
at all (a library's own thread); otherwise it is refused quietly -- a learner function
handed straight to the grader (``functools.partial(sys._getframe, 0)`` as a "function")
gets nothing either.  Reading ``f_code`` of one of the grader's frames without a consumer
means a frame escaped: that is an accusation.

Hardening
---------
The hook runs with the learner's code above it on the stack, so it must never run the
learner's code itself (it would run unguarded, the hook being busy): every builtin and
helper it calls is bound at install time, learner-supplied strings and bytes are copied
to exact ``str``/``bytes`` before any method is called on them, paths are normalised by
the guard's own code, and code objects are compared by ``id`` (hashing one hashes its
constants).

Where code comes from is decided by its file name (``Roots.kind``): the Python
installation (standard library, site-packages), the grader's read-only copy, or anything
else -- the learner.  Nothing the learner can do changes a code object's file name once
the spoofing routes above are closed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from grader.sandbox import frames as _frames
from grader.sandbox.outcomes import refusal_message

LIBRARY, GRADER, LEARNER = "library", "grader", "learner"

#: Violations and refusals kept per worker.
MAX_VIOLATIONS, MAX_REFUSALS, MAX_DETAIL_CHARS = 16, 32, 200

_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
#: event (or prefix ending in ".") -> refusal kind (grader.sandbox.outcomes.REFUSALS)
_QUIET = {
    "gc.get_objects": "gc", "gc.get_referrers": "gc", "gc.get_referents": "gc",
    "sys._current_frames": "thread_frames", "sys._current_exceptions": "thread_frames",
    "sys.settrace": "hook", "sys.setprofile": "hook", "sys.monitoring.register_callback": "hook",
    "sys.addaudithook": "audit_hook", "setopencode": "open_code",
    "ctypes.": "ctypes",
    "socket.": "network", "urllib.Request": "network", "http.client.connect": "network",
    "subprocess.Popen": "process", "os.system": "process", "os.exec": "process", "os.posix_spawn": "process",
    "os.spawn": "process", "os.fork": "process", "os.forkpty": "process", "pty.spawn": "process",
    "os.startfile": "process",
    "os.kill": "signal", "os.killpg": "signal", "signal.pthread_kill": "signal",
    "os.symlink": "link", "os.link": "link",
    "webbrowser.open": "browser",
    "sqlite3.connect": "database", "sqlite3.enable_load_extension": "database", "sqlite3.load_extension": "database",
    "os.setxattr": "xattr", "os.removexattr": "xattr",
    "cpython.PyInterpreterState_New": "interpreter",
    "marshal.load": "marshal",
}
#: harmless events under a refused prefix
_ALLOWED = frozenset({"socket.gethostname"})
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
#: Files anyone may write to without changing anything.
SYSTEM_WRITES = ("/dev/null",)


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


class Prepared:
    """What ``install`` needs that is slow to build and the same in every worker forked
    from one zygote: the frame consumers (``grader.sandbox.frames``), built from the live
    objects before any learner code exists.  Which files are the installation's is asked
    of the installed guard (``library_file``), at each use."""

    def __init__(self) -> None:
        self.is_consumer = self.is_profiler = self.fresh = None
        self.library_file = lambda filename: False  # until a guard is installed: nothing is a library's

    def _library_file(self, filename) -> bool:
        return self.library_file(filename)

    def frames(self):
        if self.is_consumer is None or not self.fresh():
            self.is_consumer, self.is_profiler, self.fresh = _frames.consumer_test(self._library_file)
        return self.is_consumer, self.is_profiler


PREPARED = Prepared()


def prepare() -> None:
    """Build the frame consumers now (a zygote does it once, before it forks workers)."""
    PREPARED.frames()


def install(roots: Roots, violations: list, refusals: list | None = None, *, trusted_codes=(),
            get_frame=sys._getframe, forbidden_code: Iterable[str] = ()) -> None:
    """Install the guard.  An accusation appends a JSON object (bytes) ``{"kind", "file",
    "line"}`` to ``violations``; a quiet refusal appends ``{"kind", "detail", "file",
    "line"}`` to ``refusals`` (``file`` relative to the sandbox's folder when the line is
    in the learner's files).

    ``trusted_codes``: the code of the worker's trusted thread's loop; a hook set on that
    thread (by JAX's profiler, from C++) is no learner's.
    ``forbidden_code``: folders no module may be loaded from (a worker without JAX,
    ``grader.sandbox.nojax``, forbids the JAX packages': their native code is XLA).

    Everything the hook uses is bound here, before any learner code exists, and it lives
    only in the hook's closure: nothing the learner's code can reach refers to it.
    """
    import _json
    import _stat
    import _thread
    import ast
    import io
    import itertools
    import linecache
    import posix
    import types

    refusals = refusals if refusals is not None else []
    # --- bound builtins and C functions (never looked up again) --------------------------
    str_, bytes_, int_, tuple_, type_, id_, len_ = str, bytes, int, tuple, type, id, len
    issubclass_, frozenset_, next_, dict_ = issubclass, frozenset, next, dict
    str_strip = str.strip
    frame_attrs = _FRAME_ATTRS
    str_copy, str_startswith, str_endswith, str_split, str_join, str_encode = (
        str.__str__, str.startswith, str.endswith, str.split, str.join, str.encode)
    bytes_decode, bytes_endswith, bytes_join = bytes.decode, bytes.endswith, b"".join
    code_type, function_type, frame_type = types.CodeType, types.FunctionType, types.FrameType
    encode = _json.encode_basestring_ascii
    stat, s_isdir, getcwd, io_open = posix.stat, _stat.S_ISDIR, posix.getcwd, io.open
    get_ident = _thread.get_ident
    PermissionError_, ImportError_, OSError_, ValueError_, Exception_ = (
        PermissionError, ImportError, OSError, ValueError, Exception)
    message = refusal_message

    # --- where things are ----------------------------------------------------------------
    def norm(path: str) -> str:
        """``os.path.normpath`` for an exact ``str``, in the guard's own code."""
        absolute = str_startswith(path, "/")
        parts: list = []
        for part in str_split(path, "/"):
            if part == "" or part == ".":
                continue
            if part == "..":
                if parts and parts[-1] != "..":
                    parts.pop()
                elif not absolute:
                    parts.append("..")
                continue
            parts.append(part)
        out = str_join("/", parts)
        return "/" + out if absolute else (out or ".")

    def prefixes(paths) -> tuple:
        return tuple_(p if p == "/" else p + "/" for p in (norm(str_copy(q)) for q in paths))

    def exact_set(paths) -> frozenset:
        return frozenset_(norm(str_copy(q)) for q in paths)

    sandbox_dir = norm(roots.sandbox)
    sandbox_prefix = sandbox_dir + "/"
    grader_dir = norm(roots.grader)
    roots_of = {name: (exact_set(paths), prefixes(paths)) for name, paths in (
        ("sandbox", (roots.sandbox,)), ("grader", (roots.grader,)), ("library", roots.library),
        ("writable", (*roots.writable, *SYSTEM_WRITES)), ("readable", roots.readable))}
    grader_import_folder = norm(os.path.dirname(roots.grader))  # the sys.path entry of the grader's copy
    forbidden = prefixes(forbidden_code)  # a worker without JAX (grader.sandbox.nojax): the JAX packages' folders
    realpath = os.path.realpath

    def under(path: str, which: str) -> bool:
        exact, pre = roots_of[which]
        return path in exact or str_startswith(path, pre)

    kinds: dict = {}

    def kind_of(filename) -> str:
        """``Roots.kind`` for a code object's file name, in the guard's own code."""
        if type_(filename) is not str_:
            if not issubclass_(type_(filename), str_):
                return LEARNER
            filename = str_copy(filename)
        k = kinds.get(filename)
        if k is None:
            if str_startswith(filename, "<frozen ") or filename == "<built-in>" or filename == "<frozen>":
                k = LIBRARY
            else:
                f = norm(filename)
                k = GRADER if under(f, "grader") else LIBRARY if under(f, "library") else LEARNER
            if len_(kinds) > 4096:
                kinds.clear()
            kinds[filename] = k
        return k

    def exact(value):
        """A learner-supplied path or text as an exact ``str`` (or None)."""
        t = type_(value)
        if t is str_:
            return value
        if issubclass_(t, str_):
            return str_copy(value)
        if issubclass_(t, bytes_):
            return bytes_decode(value, "utf-8", "surrogateescape")
        return None

    PREPARED.library_file = lambda filename: kind_of(filename) == LIBRARY
    is_consumer, is_profiler = PREPARED.frames()

    # --- who asks ------------------------------------------------------------------------
    own_codes: set = set()  # ids of the guard's own code, skipped when looking for who asked
    display_codes = frozenset_({id_(linecache.updatecache.__code__)})  # reads a file's lines to show them
    ast_parse_code = id_(ast.parse.__code__)  # compiles to an AST only: no code object comes out

    def caller():
        """The first frame above the hook that is not the guard's own."""
        try:
            frame = get_frame(1)
        except ValueError_:  # an operation from C with no Python frame above it
            return None
        while frame is not None and id_(frame.f_code) in own_codes:
            frame = frame.f_back
        return frame

    def walk(frame):
        """(kind of the first code above ``frame`` that is not the installation's -- None
        when there is none --, whether a frame consumer came before it)."""
        consumer = False
        while frame is not None:
            k = kind_of(frame.f_code.co_filename)
            if k != LIBRARY:
                return k, consumer
            if not consumer and is_consumer(frame):
                consumer = True
            frame = frame.f_back
        return None, consumer

    def evidence(frame) -> tuple:
        """(file, line) of the learner's code that asked: the first frame in the learner's
        own files (relative to the sandbox), else the first learner frame (``<string>``)."""
        first = None
        while frame is not None:
            code = frame.f_code
            filename = code.co_filename
            name = exact(filename)
            if name is not None:
                path = norm(name)
                if str_startswith(path, sandbox_prefix):
                    return path[len_(sandbox_prefix):], frame.f_lineno
                if first is None and kind_of(name) == LEARNER:
                    first = (name, frame.f_lineno)
            frame = frame.f_back
        return first or ("", 0)

    def display_read(frame) -> bool:
        """Is this read linecache's, on behalf of a traceback or a warning that shows
        source lines (JAX extracts the whole stack, grader frames included, whenever an
        error passes through a transformation)?  Such text is shown, never run: compiling
        it under the grader's file name is an accusation below."""
        while frame is not None:
            code = frame.f_code
            if id_(code) in display_codes:
                return True
            if kind_of(code.co_filename) != LIBRARY:
                return False
            frame = frame.f_back
        return False

    # --- the three outcomes ----------------------------------------------------------------
    seen: set = set()

    def fragment(fields: tuple) -> bytes:
        parts = []
        for key, value in fields:
            if type_(value) is int_:
                parts.append(b'"%s":%d' % (str_encode(key, "ascii"), value))
            else:
                parts.append(b'"%s":%s' % (str_encode(key, "ascii"), str_encode(encode(value), "ascii")))
        return b"{" + bytes_join_comma(parts) + b"}"

    bytes_join_comma = b",".join

    def refuse(kind: str, frame, detail: str = "", exc=None):
        """Outcome 2: raise an ordinary exception; report it, hold nothing against anyone."""
        file, line = evidence(frame)
        key = ("r", kind, file, line)
        if key not in seen and len_(refusals) < MAX_REFUSALS:
            seen.add(key)
            refusals.append(fragment((("kind", kind), ("detail", detail[:MAX_DETAIL_CHARS]), ("file", file),
                                      ("line", line))))
        raise (exc or PermissionError_)(message(kind, detail[:MAX_DETAIL_CHARS]))

    def accuse(kind: str, frame):
        """Outcome 3: refuse, and record a violation with the learner's file and line."""
        file, line = evidence(frame)
        key = ("a", kind, file, line)
        if key not in seen and len_(violations) < MAX_VIOLATIONS:
            seen.add(key)
            violations.append(fragment((("kind", kind), ("file", file), ("line", line))))
        raise PermissionError_("refused by the grader's sandbox, and recorded as an integrity violation: an "
                               "exercise never needs this")

    # --- frames --------------------------------------------------------------------------
    def on_frame(attr, obj):
        frame = caller()
        first, consumer = walk(frame)
        if consumer or first is None:
            return  # a consumer gives its caller text, or no code but the installation's is there
        if attr == "f_code" and type_(obj) is frame_type:  # the asker already holds a frame: whose?
            if kind_of(obj.f_code.co_filename) == GRADER:
                accuse("grader_frame", frame)
        refuse("frame", frame, attr)

    # --- files -----------------------------------------------------------------------------
    def resolve(path, frame):
        p = exact(path)
        if p is None:
            return None
        if not str_startswith(p, "/"):
            if ".." in str_split(p, "/"):
                refuse("dotdot", frame, p)
            p = getcwd() + "/" + p
        return norm(p)

    def isdir(p: str) -> bool:
        try:
            return s_isdir(stat(p).st_mode)
        except (OSError_, ValueError_):
            return False

    def check_path(path, write: bool, frame, listing: bool = False):
        if type_(path) is int_:  # a descriptor it already holds
            return None
        p = resolve(path, frame)
        if p is None:
            return None
        if write:
            if not under(p, "writable"):
                refuse("write_outside", frame, p)
        elif listing and (under(p, "grader") or p == grader_import_folder):
            pass  # names only, and public ones: importers scan every folder on sys.path (SciPy does)
        elif under(p, "grader"):
            shown = str_endswith(p, ".py") and display_read(frame)  # source lines for a traceback, never a .pyc
            if not shown and walk(frame)[0] != GRADER:  # the grader's own tracebacks read its files
                refuse("read_grader", frame, p)
        elif not under(p, "readable"):
            refuse("read_outside", frame, p)
        return p

    last_pyc: dict = {}  # thread -> (the .pyc the import system opened last, whether the learner could write it)

    def on_open(args) -> None:
        frame = caller()
        path, mode, flags = (tuple_(args) + (None, None, None))[:3]
        mode = exact(mode)
        write = (mode is not None and ("w" in mode or "a" in mode or "x" in mode or "+" in mode)) or \
                (type_(flags) is int_ and flags & _WRITE_FLAGS != 0)
        p = check_path(path, write, frame)
        if p is None:
            return
        if not write and not under(p, "sandbox") and isdir(p) and walk(frame)[0] == LEARNER:
            refuse("read_outside", frame, p)
        if str_endswith(p, ".pyc"):  # what marshal.loads may load next (see "marshal.loads")
            try:
                with io_open(p, "rb") as fh:
                    last_pyc[get_ident()] = (fh.read(), under(p, "writable"))
            except OSError_:
                last_pyc.pop(get_ident(), None)

    def on_path(event, args):
        frame = caller()
        indexes, write = _PATH_EVENTS[event]
        if event == "os.chdir" and args and type_(args[0]) is int_:
            refuse("chdir_fd", frame)
        for i in indexes:
            if i < len_(args):
                check_path(args[i], write, frame, listing=event in ("os.listdir", "os.scandir", "glob.glob"))

    # --- code ----------------------------------------------------------------------------
    def file_bytes(filename: str):
        """The file's bytes, or None when it cannot be read."""
        try:
            with io_open(filename, "rb") as fh:
                return fh.read()
        except OSError_:
            return None

    def same_as_file(source, filename: str) -> bool:
        data = file_bytes(filename)
        if data is None:
            return False
        if type_(source) is str_ or issubclass_(type_(source), str_):
            return bytes_decode(data, "utf-8", "replace") == str_copy(source)
        if issubclass_(type_(source), bytes_):
            return data == bytes_join((source,))
        return False

    def segment_of_file(source, filename: str) -> bool:
        """Is ``source`` a piece of one line of ``filename``?  CPython's own traceback
        printer (a thread that dies, an unraisable exception) parses each shown line's
        segment under the frame's file name to place its ``^^^`` markers: a tree, from
        the file's own text."""
        if type_(source) is str_ or issubclass_(type_(source), str_):
            text = str_copy(source)
        elif issubclass_(type_(source), bytes_):
            text = bytes_decode(bytes_join((source,)), "utf-8", "replace")
        else:
            return False
        if not text or "\n" in text[:-1] or len_(text) > 4096:
            return False
        data = file_bytes(filename)
        return data is not None and str_strip(text) in bytes_decode(data, "utf-8", "replace")

    module_type, sys_modules = types.ModuleType, sys.modules

    def library_importing(frame) -> bool:
        """Is a module of the installation being imported between ``frame`` and the first
        code that is not the installation's?  Then the library acts on its own behalf
        (``types.coroutine`` on its own generators at import, as trio and asyncio do): the
        learner's ``import`` line asked for the module, not for what its code does.  Only
        the real module's own execution counts: its globals are the dict of the module
        that ``sys.modules`` holds under its name."""
        while frame is not None:
            code = frame.f_code
            if kind_of(code.co_filename) != LIBRARY:
                return False
            if exact(code.co_name) == "<module>":
                glb = frame.f_globals
                name = glb.get("__name__") if type_(glb) is dict_ else None
                mod = sys_modules.get(name) if type_(name) is str_ else None
                if type_(mod) is module_type and mod.__dict__ is glb:
                    return True
            frame = frame.f_back
        return False

    def foreign(filename) -> bool:
        return kind_of(filename) != LEARNER

    def on_compile(args):
        source, filename = (tuple_(args) + (None, None))[:2]
        name = exact(filename)
        if name is None:
            return
        k = kind_of(name)
        if k == LEARNER:
            return
        frame = caller()
        if frame is not None and id_(frame.f_code) == ast_parse_code:
            return  # ast.parse: a tree, not code
        who = walk(frame)[0]
        if who == GRADER:
            return
        if who != LEARNER and segment_of_file(source, name):
            return  # the traceback printer placing its markers, with no learner code asking
        if k == GRADER or not same_as_file(source, name):
            accuse("spoof_compile", frame)

    def on_code_new(args):
        if len_(args) > 1 and foreign(args[1]):
            frame = caller()
            if walk(frame)[0] != GRADER and not library_importing(frame):
                accuse("spoof_code", frame)

    def on_function_new(args):
        code = args[0] if args else None
        if type_(code) is code_type and foreign(code.co_filename):
            frame = caller()
            if walk(frame)[0] != GRADER and not library_importing(frame):
                accuse("spoof_function", frame)

    def on_setattr(args):
        if len_(args) < 3 or type_(args[1]) is not str_ or args[1] != "__code__" or type_(args[0]) is not function_type:
            return
        new = args[2]
        if type_(new) is not code_type:
            return  # CPython refuses it anyway
        if foreign(args[0].__code__.co_filename) or foreign(new.co_filename):
            frame = caller()
            if walk(frame)[0] != GRADER and not library_importing(frame):
                accuse("code_swap", frame)

    def on_marshal(args):
        data = args[0] if args else None
        got = last_pyc.get(get_ident())
        frame = caller()
        if type_(data) is not bytes_ or not data or got is None or not bytes_endswith(got[0], data):
            refuse("marshal", frame)
        if got[1]:
            refuse("pyc", frame, exc=ImportError_)

    def on_exec(args):
        code = args[0] if args else None
        if type_(code) is code_type and exact(code.co_name) != "<module>" and foreign(code.co_filename):
            frame = caller()
            if walk(frame)[0] != GRADER:
                accuse("library_exec", frame)

    def on_import(args):
        name = exact(args[0]) if args else None
        if name is not None and (name == "grader" or str_startswith(name, "grader.")):
            refuse("grader_import", caller(), name, exc=ImportError_)
        filename = exact(args[1]) if len_(args) > 1 else None
        if filename is not None and str_endswith(filename, (".so", ".pyd", ".dylib")) and kind_of(filename) != LIBRARY:
            refuse("native", caller(), filename, exc=ImportError_)
        if forbidden and filename is not None and (str_startswith(norm(filename), forbidden)
                                                   or str_startswith(norm(realpath(filename)), forbidden)):
            refuse("no_jax", caller(), filename, exc=ImportError_)

    own_pid = posix.getpid()

    def on_prlimit(args):
        pid = args[0] if args else 0
        limits = args[2] if len_(args) > 2 else None
        if limits is not None and type_(pid) is int_ and pid not in (0, own_pid):
            refuse("limits", caller())

    trusted = frozenset_(id_(code) for code in trusted_codes)

    def in_trusted_thread(frame) -> bool:
        """Is ``frame`` on the stack of the worker's trusted thread (where no learner code runs)?"""
        while frame is not None:
            if id_(frame.f_code) in trusted:
                return True
            frame = frame.f_back
        return False

    def on_hook(event, args):
        frame = caller()
        if frame is None or is_profiler(frame) or in_trusted_thread(frame):
            # JAX's profiler session: a hook of its own, in C++, which it also sets on the
            # other threads, the trusted one included; or native code with no Python caller
            return
        refuse("hook", frame, event)

    def on_getattr(args):
        if len_(args) > 1:
            attr = args[1]
            if type_(attr) is str_ and (attr in frame_attrs or attr == "f_code"):
                on_frame(attr, args[0])

    handlers = {
        "object.__getattr__": on_getattr,
        "sys._getframe": lambda args: on_frame("sys._getframe", None),
        "open": on_open,
        "import": on_import,
        "compile": on_compile,
        "code.__new__": on_code_new,
        "function.__new__": on_function_new,
        "object.__setattr__": on_setattr,
        "marshal.loads": on_marshal,
        "exec": on_exec,
        "resource.prlimit": on_prlimit,
        "sys.settrace": lambda args: on_hook("sys.settrace", args),
        "sys.setprofile": lambda args: on_hook("sys.setprofile", args),
    }
    for event in _PATH_EVENTS:
        handlers[event] = (lambda e: lambda args: on_path(e, args))(event)
    quiet = dict(_QUIET)
    quiet_prefixes = tuple_(k for k in quiet if str_endswith(k, "."))
    allowed = frozenset_(_ALLOWED)
    handler_get, quiet_get = handlers.get, quiet.get
    busy: set = set()
    busy_add, busy_discard = busy.add, busy.discard

    def judge(event: str, args) -> None:
        handler = handler_get(event)
        if handler is not None:
            handler(args)
            return
        kind = quiet_get(event)
        if kind is None and str_startswith(event, quiet_prefixes) and event not in allowed:
            kind = next_(quiet[p] for p in quiet_prefixes if str_startswith(event, p))
        if kind is not None:
            refuse(kind, caller(), event)

    def hook(event: str, args) -> None:
        # sys.audit() lets code raise any event, with any name and arguments: a name that is
        # not an exact str is no event CPython raises (and comparing it could run its code)
        if type_(event) is not str_ or event == "builtins.id" or type_(args) is not tuple_:
            return
        ident = get_ident()
        if ident in busy:
            return
        busy_add(ident)
        try:
            judge(event, args)
        finally:
            busy_discard(ident)

    def collect(code):
        own_codes.add(id_(code))
        for const in code.co_consts:
            if type_(const) is code_type:
                collect(const)

    for fn in (norm, prefixes, exact_set, under, kind_of, exact, caller, walk, evidence, display_read, fragment,
               refuse, accuse, on_frame, resolve, isdir, check_path, on_open, on_path, same_as_file, foreign,
               on_compile, on_code_new, on_function_new, on_setattr, on_marshal, on_exec, on_import, on_prlimit,
               on_hook, in_trusted_thread, on_getattr, judge, hook, *handlers.values(), is_consumer, is_profiler):
        collect(fn.__code__)
    collect(PREPARED._library_file.__code__)
    collect(PREPARED.library_file.__code__)
    for fn in (is_consumer, is_profiler):
        for cell in fn.__closure__ or ():
            value = cell.cell_contents
            if type_(value) is function_type:
                collect(value.__code__)
    itertools.count  # noqa: B018 - imported above so the guard imports nothing once installed
    sys.addaudithook(hook)
