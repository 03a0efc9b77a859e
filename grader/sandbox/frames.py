"""Which library code may hold a live stack frame while the learner's code is graded.

CPython audits how a frame is *obtained* (``sys._getframe``, a traceback's ``tb_frame``,
a generator's ``gi_frame``, ``frame.f_code``) but not what is done with one: ``f_back``,
``f_globals`` and ``f_locals`` are free.  A frame in the learner's hands is therefore a
walk up to the probe's frames and the grader's module globals.  The guard
(``grader.sandbox.guard``) hands a frame out only when a **consumer** stands between the
operation and the code that asked: a library function that reads frames and gives its
caller strings and numbers, never a frame -- the standard library's stack extraction
(``traceback``), logging's ``findCaller``, the module-name lookups of ``typing``,
``enum`` and ``collections.namedtuple``, JAX's traceback filtering, and a few
third-party lookups of the same kind.

A consumer's promise holds only while the code it calls is its own, so each one is
**pinned**: every global, class attribute, module attribute and builtin its code (and
the same-module code it reaches) looks up is recorded at install time, and the consumer
counts only while all of them are the same objects and the frame runs with its real
module globals.  A learner who replaces ``traceback.walk_stack`` or ``linecache.lazycache``
(which receive frames and frame globals) turns ``traceback`` back into ordinary code: the
frame is refused.  A learner object whose ``__repr__`` or ``__eq__`` runs while a
consumer holds a frame is the first learner frame of its own request, with no consumer
between it and the operation, so it gets nothing.

Consumers are found from the live function objects when the guard is installed; a name
missing on another Python is skipped (Python 3.12 looks module names up with
``sys._getframemodulename``, which hands out no frame at all).  Third-party modules that
are not imported yet (matplotlib, SciPy, absl) are recognised by file and qualified name,
and count only while the names through which they could pass a frame on are the
installation's own modules.
"""

from __future__ import annotations

import builtins
import importlib
import itertools
import operator
import sys
import types

#: (module, dotted attribute path[, (module, path) of code it relies on, pinned with it]) of
#: consumers in modules the worker has imported by the time the guard is installed.  Each
#: reads frames and returns or records only text and numbers.
CONSUMERS: tuple[tuple, ...] = (
    ("traceback", "extract_stack"),
    ("traceback", "format_stack"),
    ("traceback", "print_stack"),
    ("traceback", "extract_tb"),
    ("traceback", "StackSummary.extract"),
    ("traceback", "StackSummary._extract_from_extended_frame_gen"),
    ("traceback", "TracebackException.__init__"),
    ("logging", "Logger.findCaller"),
    ("typing", "_caller"),
    ("typing", "TypedDict"),
    ("typing", "NamedTuple"),
    ("typing", "_allow_reckless_class_checks"),
    ("typing_extensions", "_caller"),
    ("typing_extensions", "_has_generic_or_protocol_as_origin"),
    ("collections", "namedtuple"),
    ("enum", "EnumType._create_"),
    ("enum", "EnumMeta._create_"),
    ("inspect", "getgeneratorstate"),
    ("inspect", "getcoroutinestate"),
    ("inspect", "getasyncgenstate"),
    ("asyncio.coroutines", "_format_coroutine"),
    ("asyncio.base_tasks", "_task_print_stack"),
    ("jax._src.traceback_util", "filter_traceback"),
    ("jax._src.traceback_util", "_add_call_stack_frames"),
    ("jax._src.traceback_util", "_add_tracebackhide_to_hidden_frames"),
    ("jax._src.traceback_util", "_is_under_reraiser"),
    ("jax._src.lazy_loader", "attach"),
    ("numpy.matrixlib.defmatrix", "bmat"),
    # eqx.error_if records which of Equinox's jit wrappers it runs under (a bytes marker in
    # their locals) and the user's frames as text, for its runtime error message
    ("equinox._errors", "branched_error_if_impl"),
    ("numpy.lib._index_tricks_impl", "AxisConcatenator.__getitem__"),
    # JAX's persistent compile cache takes a file lock, and filelock keeps its own frame in
    # the lock's per-thread state while it acquires: counted as JAX's, with filelock pinned
    ("jax._src.lru_cache", "LRUCache.get", ("filelock._core._lock", "BaseFileLock.acquire")),
    ("jax._src.lru_cache", "LRUCache.put", ("filelock._core._lock", "BaseFileLock.acquire")),
)

#: Consumers in modules imported later, if at all: (file path ending, qualified name, the
#: global names through which a frame could leave them -> the module each must be).
LATE_CONSUMERS: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("matplotlib/_api/__init__.py", "warn_external",
     {"sys": "sys", "re": "re", "itertools": "itertools", "warnings": "warnings"}),
    ("scipy/_lib/_bunch.py", "_make_tuple_bunch", {"_sys": "sys"}),
    ("absl/logging/__init__.py", "ABSLLogger.findCaller", {"sys": "sys", "io": "io", "traceback": "traceback"}),
    ("absl/logging/__init__.py", "_fast_stack_trace", {"inspect": "inspect"}),
    # absl names the module that defines a flag (optax and absl.logging define flags at import)
    ("absl/flags/_helpers.py", "get_calling_module_object_and_name", {"sys": "sys"}),
)

#: Functions that start or stop JAX's profiler: its session installs a profiling hook of
#: its own (C++, recording into its own buffer; no frame reaches Python code).
PROFILER: tuple[tuple[str, str], ...] = (
    ("jax._src.profiler", "start_trace"),
    ("jax._src.profiler", "stop_trace"),
)

#: Modules whose whole namespace (and classes) a consumer relies on while it holds frames.
WHOLE_MODULES = ("traceback", "linecache")


def _own_class(module: str, path: str):
    """For a classmethod consumer (``StackSummary.extract``), the class it must be called
    on: it looks its helpers up on ``klass``, so on a learner's subclass a C callable there
    (``dict``) would receive the frames with no learner frame on the stack to refuse."""
    owner_path, _, name = path.rpartition(".")
    if not owner_path:
        return None
    owner = resolve_object(module, owner_path)
    raw = owner.__dict__.get(name) if isinstance(owner, type) else None
    return owner if isinstance(raw, classmethod) else None


def resolve_object(module: str, path: str):
    """The object at the dotted ``path`` in ``module`` (imported if it is not yet), or None."""
    mod = sys.modules.get(module)
    if mod is None:
        try:
            mod = importlib.import_module(module)
        except Exception:  # noqa: BLE001 - a module this Python or this installation lacks
            return None
    obj = mod
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _resolve(module: str, path: str):
    obj = resolve_object(module, path)
    obj = getattr(obj, "__func__", obj)  # a classmethod's function
    return obj if isinstance(obj, types.FunctionType) else None


class _Pins:
    """The namespaces and names a consumer relies on while it holds a frame: the names its
    code (and nested code) looks up, in its module, in the modules it names and in
    builtins; the same module's functions it calls, followed; and all of
    ``WHOLE_MODULES`` (with their classes) once its code reaches one of them."""

    def __init__(self, whole: dict) -> None:
        self.names: dict[int, tuple[object, set[str]]] = {}  # id(namespace) -> (namespace, names)
        self._whole = whole  # module name -> _Pins of that whole module, shared between consumers
        self.wholes: set[str] = set()
        self._seen: set[int] = set()

    def pin(self, namespace, name: str) -> None:
        self.names.setdefault(id(namespace), (namespace, set()))[1].add(name)

    def follow(self, fn: types.FunctionType) -> "_Pins":
        todo = [(fn.__code__, fn.__globals__)]
        while todo:
            code, glb = todo.pop()
            if id(code) in self._seen:
                continue
            self._seen.add(id(code))
            names = set(code.co_names)
            todo += [(c, glb) for c in code.co_consts if isinstance(c, types.CodeType)]
            for name in names:
                if name in glb:
                    self.pin(glb, name)
                    value = glb[name]
                    if isinstance(value, types.FunctionType) and value.__globals__ is glb:
                        todo.append((value.__code__, glb))
                    elif isinstance(value, types.ModuleType):
                        self._module(value, names)
                elif name in builtins.__dict__:
                    self.pin(builtins.__dict__, name)
            if glb.get("__name__") in WHOLE_MODULES:
                self.wholes.add(glb["__name__"])
        return self

    def _module(self, module: types.ModuleType, names: set[str]) -> None:
        if module.__name__ in WHOLE_MODULES:
            self.wholes.add(module.__name__)
            return
        space = vars(module)
        for name in names & space.keys():
            self.pin(space, name)

    def whole_module(self, name: str) -> "_Pins":
        """Pin every name of module ``name`` and of its classes, and follow its functions."""
        mod = sys.modules.get(name) or importlib.import_module(name)
        space = vars(mod)
        for key, value in list(space.items()):
            self.pin(space, key)
            if isinstance(value, type) and getattr(value, "__module__", None) == name:
                for attr, member in vars(value).items():
                    self.pin(vars(value), attr)
                    member = getattr(member, "__func__", member)
                    if isinstance(member, types.FunctionType):
                        self.follow(member)
            elif isinstance(value, types.FunctionType) and value.__globals__ is space:
                self.follow(value)
        return self

    def frozen(self) -> tuple:
        """((namespace, its keys now, getter of the pinned names, their objects now), ...),
        this consumer's own pins first, then those of the whole modules it reaches."""
        out = []
        for namespace, names in self.names.values():
            keys = tuple(sorted(names))
            getter = operator.itemgetter(*keys)
            values = getter(namespace) if len(keys) > 1 else (getter(namespace),)
            out.append((namespace, tuple(namespace), getter, values, len(keys) > 1))
        seen = {id(ns) for ns, *_ in out}
        for name in sorted(self.wholes):
            for entry in self._whole_frozen(name):
                if id(entry[0]) not in seen:
                    seen.add(id(entry[0]))
                    out.append(entry)
        return tuple(out)

    def _whole_frozen(self, name: str) -> tuple:
        if name not in self._whole:
            self._whole[name] = ()  # a whole module that reaches another reaches it once
            whole = _Pins(self._whole).whole_module(name)
            self._whole[name] = whole.frozen()
        return self._whole[name]


def consumer_test(library_file):
    """Build, from the live objects, ``(is_consumer(frame), is_profiler(frame), fresh())``
    for the guard: whether a frame is one of ``CONSUMERS`` (or ``LATE_CONSUMERS``), resp. of
    ``PROFILER``, running its own code with its own module's untouched names; and whether
    nothing pinned has changed since (a zygote builds this once for all its workers).

    ``library_file(filename) -> bool`` says whether code comes from the Python
    installation.  Everything the returned function calls is bound now, and it calls no
    method of an object the learner could have made: it runs inside the audit hook, where
    learner code would run unguarded."""
    whole: dict = {}
    # id(code object) -> (the globals it must run with, its pins); ids, because hashing a
    # code object hashes its constants, which may be the learner's objects
    codes: dict = {}
    keep = []  # the consumers' code objects, alive so that their ids stay theirs
    for module, path, *relies_on in CONSUMERS:
        fn = _resolve(module, path)
        if fn is not None:
            pins = _Pins(whole).follow(fn)
            for other in (_resolve(m, p) for m, p in relies_on):
                if other is not None:
                    pins.follow(other)
            codes[id(fn.__code__)] = (fn.__globals__, pins.frozen(), _own_class(module, path))
            keep.append(fn.__code__)
    profiler: dict = {}
    for module, path in PROFILER:
        fn = _resolve(module, path)
        if fn is not None:
            profiler[id(fn.__code__)] = (fn.__globals__, _Pins(whole).follow(fn).frozen())
            keep.append(fn.__code__)
    late_pins = _Pins(whole)
    for name in WHOLE_MODULES:
        late_pins.wholes.add(name)
    late_frozen = late_pins.frozen()
    late: dict[str, list[tuple[str, tuple, tuple]]] = {}
    for suffix, qualname, sinks in LATE_CONSUMERS:
        mods = tuple((glob_name, sys.modules.get(module) or importlib.import_module(module))
                     for glob_name, module in sinks.items())
        late.setdefault(qualname, []).append(("/" + suffix, tuple(n for n, _ in mods), tuple(m for _, m in mods)))
    is_, all_, map_, type_, repeat, str_, dict_, id_ = operator.is_, all, map, type, itertools.repeat, str, dict, id
    len_ = len
    dict_get, endswith, late_get, codes_get, profiler_get = dict.get, str.endswith, late.get, codes.get, profiler.get
    missing = object()
    # a function frame's f_locals: a dict, or on Python 3.13+ a FrameLocalsProxy (PEP 667)
    locals_type = type_((lambda: sys._getframe().f_locals)())
    locals_get = locals_type.get
    KeyError_ = KeyError

    def plain_keys(namespace) -> bool:
        """Only exact ``str`` keys: a lookup then compares no object of the learner's (a
        namespace whose keys are the very objects they were at install time has none)."""
        return all_(map_(is_, map_(type_, namespace), repeat(str_)))

    def pinned(frozen) -> bool:
        for namespace, keys, getter, values, several in frozen:
            if not (len_(namespace) == len_(keys) and all_(map_(is_, namespace, keys))) and not plain_keys(namespace):
                return False
            try:
                now = getter(namespace)
            except KeyError_:
                return False
            if several:
                if not all_(map_(is_, now, values)):
                    return False
            elif now is not values[0]:
                return False
        return True

    def is_consumer(frame) -> bool:
        code = frame.f_code
        entry = codes_get(id_(code), None)
        if entry is not None:
            if entry[2] is not None:  # a classmethod: only on its own class, whose names are pinned
                f_locals = frame.f_locals
                if type_(f_locals) is not locals_type or locals_get(f_locals, "klass", missing) is not entry[2]:
                    return False
            return frame.f_globals is entry[0] and pinned(entry[1])
        candidates = late_get(code.co_qualname, None) if type_(code.co_qualname) is str_ else None
        if not candidates:
            return False
        filename = code.co_filename
        if type_(filename) is not str_ or not library_file(filename):
            return False
        f_globals = frame.f_globals
        if type_(f_globals) is not dict_ or not plain_keys(f_globals):
            return False
        for suffix, names, modules in candidates:
            if endswith(filename, suffix) and all_(map_(is_, [dict_get(f_globals, n, missing) for n in names],
                                                          modules)):
                return pinned(late_frozen)
        return False

    def is_profiler(frame) -> bool:
        entry = profiler_get(id_(frame.f_code), None)
        return entry is not None and frame.f_globals is entry[0] and pinned(entry[1])

    def fresh() -> bool:
        """Whether every consumer's names are still the objects they were when this was built."""
        return all(pinned(entry[1]) for entry in [*codes.values(), *profiler.values()]) and pinned(late_frozen)

    is_consumer.keep = keep
    return is_consumer, is_profiler, fresh
