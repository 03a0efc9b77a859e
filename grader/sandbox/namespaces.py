"""The grader's own modules, as they were before the learner's code loaded: any change accused.

Importing the grader is refused and its modules leave ``sys.modules`` before the learner's
module loads (``grader.sandbox.context.seal_grader``), but that protects names, not objects:
every grader class stays reachable from ``object.__subclasses__()``, and a function's
``__globals__`` is its module's live namespace -- neither is covered by an audit event, so the
guard cannot see the route.  Through it a file can rebind what a probe looks up at run time
(``grader.probes.generic.ir``) and make a measurement lie.

So the worker takes a **snapshot** of every ``grader.*`` module after the probes are imported
and before any learner code runs, and the trusted thread compares it after each request,
before the answer is sent (``Watch.changes``).  It covers

* each module's namespace: the same names bound to the same objects, none added or removed
  (a name added can shadow a builtin the module calls);
* the ``__dict__`` of every class defined there (nested classes included), likewise;
* each function defined there (module level, methods, and functions kept in containers or
  as objects' attributes): its ``__code__``, ``__defaults__``, ``__kwdefaults__`` and the
  contents of its closure cells;
* the plain containers (``dict``, ``list``, ``set``, ``tuple``) and the ``__dict__`` of
  instances of grader classes held in those namespaces, a few levels deep: every entry there
  at snapshot time must still be there, the same object.  Entries may be *added*: the
  clean worker's caches start empty and fill up.  An entry planted before a probe adds it
  would not be seen here, so probes that run beside learner code keep no cache between
  requests (``tests/test_grader_namespaces.py`` holds every module-level container of the
  probes to a declared list).

Honest code never touches the grader's modules -- it cannot even import them by name -- so a
change is an ``integrity`` accusation (kind ``grader_rebind``) naming what changed, with the
file and line where the replacement was defined when it is a plain function of the learner's.
JAX's own modules are not watched: honest code may monkeypatch JAX; instead JAX's code is
frozen before learner code exists, as the grader's is (``grader.sandbox.freeze.library``), and
``grader.sandbox.pins`` seals the JAX classes and pins the primitive names the probes read.

A change made and undone inside one request (a replacement that puts the original back
when the grader calls it) leaves nothing to compare: that is why, before the snapshot, the
worker freezes the grader's code (``grader.sandbox.freeze``: global names and grader-module
attributes become constants, so the grader never calls such a replacement) and seals its
classes (their attributes can no longer be set); what neither covers (an object's attributes,
container entries) the README's threat model lists.

Everything ``changes`` calls is bound when the snapshot is taken and it calls no method of
an object the learner could have made: it iterates exact dicts, lists, sets and tuples and
compares identities (``tests/test_trusted_thread.py`` reads its bytecode).
"""

from __future__ import annotations

import operator
import types
from _json import encode_basestring_ascii as _encode

#: Names the interpreter itself adds to a module's namespace at run time.
RUNTIME_NAMES = frozenset({"__warningregistry__"})
#: How deep plain containers are followed from a namespace, and how many entries a snapshot
#: holds at most (a bound on the trusted thread's work per request).
MAX_DEPTH = 4
MAX_ENTRIES = 400_000

_PLAIN = (dict, list, set, frozenset, tuple)


class _Builder:
    """Walks the grader's modules once and records what ``changes`` compares."""

    def __init__(self, modules: dict) -> None:
        self.module_names = {id(vars(m)): name for name, m in modules.items()}
        self.grader_globals = frozenset(self.module_names)
        self.module_name_set = frozenset(modules)
        self.exact: list = []  # (label, namespace, keys, values): same keys, same objects, nothing added
        self.kept: list = []  # (label, container, kind, snapshot): entries kept (additions allowed)
        self.functions: list = []  # (label, function, code, defaults, kwdefaults, cells, cell contents)
        self.classes: list = []  # every grader class met (what ``grader.sandbox.freeze.seal`` makes immutable)
        self.seen: set = set()
        self.entries = 0

    def build(self, modules: dict) -> None:
        for name in sorted(modules):
            space = vars(modules[name])
            self.namespace(name, space, lambda key: key not in RUNTIME_NAMES)
            for key, value in list(space.items()):
                self.value(f"{name}.{key}", value, 0)

    def namespace(self, label: str, space, keep=lambda key: True) -> None:
        """``space``: a module's dict, or a class's mappingproxy (read through its own methods,
        which read the class's real dict)."""
        items = [(k, v) for k, v in space.items() if keep(k)]
        reads = (dict.items, dict.values) if type(space) is dict else (types.MappingProxyType.items,
                                                                         types.MappingProxyType.values)
        self.exact.append((label, space, *reads, tuple(k for k, _ in items), tuple(v for _, v in items),
                           frozenset(id(k) for k, _ in items)))
        self.entries += len(items)

    def grader_class(self, value) -> bool:
        return isinstance(value, type) and getattr(value, "__module__", None) in self.module_name_set

    def value(self, label: str, value, depth: int) -> None:
        if id(value) in self.seen or self.entries > MAX_ENTRIES:
            return
        if isinstance(value, (classmethod, staticmethod)):
            value = value.__func__
        elif isinstance(value, property):
            for part, fn in (("fget", value.fget), ("fset", value.fset), ("fdel", value.fdel)):
                if fn is not None:
                    self.value(f"{label}.{part}", fn, depth)
            return
        if type(value) is types.FunctionType:
            if id(value.__globals__) in self.grader_globals:
                self.seen.add(id(value))
                self.function(label, value, depth)
            return
        if self.grader_class(value):
            self.seen.add(id(value))
            self.classes.append(value)
            self.namespace(label, vars(value))  # a mappingproxy: read through, never stored
            for key, member in list(vars(value).items()):
                self.value(f"{label}.{key}", member, depth)
            return
        if depth >= MAX_DEPTH:
            return
        kind = type(value)
        if kind in _PLAIN:
            self.seen.add(id(value))
            self.container(label, value, depth)
        elif self.grader_class(kind) and type(getattr(value, "__dict__", None)) is dict:
            self.seen.add(id(value))
            self.container(label, value.__dict__, depth)

    def container(self, label: str, value, depth: int) -> None:
        kind = type(value)
        if kind is dict:
            snap = tuple(value.items())
            self.kept.append((label, value, "dict", snap))
            for key, item in snap:
                self.value(f"{label}[{key!r}]" if type(key) is str else f"{label}[...]", item, depth + 1)
        elif kind is list:
            snap = tuple(value)
            self.kept.append((label, value, "list", snap))
            for i, item in enumerate(snap):
                self.value(f"{label}[{i}]", item, depth + 1)
        elif kind in (set, frozenset):
            snap = tuple(value)
            if kind is set:
                self.kept.append((label, value, "set", snap))
            for item in snap:
                self.value(f"{label}{{...}}", item, depth + 1)
        else:  # a tuple cannot change; what it holds can
            snap = value
            for i, item in enumerate(snap):
                self.value(f"{label}[{i}]", item, depth + 1)
        self.entries += len(snap)

    def function(self, label: str, fn: types.FunctionType, depth: int) -> None:
        cells = fn.__closure__ or ()
        contents = []
        for cell in cells:
            try:
                contents.append(cell.cell_contents)
            except ValueError:  # an empty cell (a name assigned later in the enclosing function)
                contents.append(_EMPTY)
        self.functions.append((label, fn, fn.__code__, fn.__defaults__, fn.__kwdefaults__, cells, tuple(contents)))
        self.entries += 4 + len(cells)
        for i, item in enumerate(contents):
            self.value(f"{label}.<closure {i}>", item, depth + 1)
        for part in (fn.__defaults__ or (), tuple((fn.__kwdefaults__ or {}).values())):
            for item in part:
                self.value(f"{label}.<default>", item, depth + 1)


def grader_code(modules: dict) -> tuple[list, list]:
    """``(functions, classes)``: every grader function the snapshot covers (module level,
    methods, functions held in containers, closures and defaults) and every grader class it
    meets (nested ones included) -- what ``grader.sandbox.freeze`` rewrites and seals."""
    builder = _Builder(modules)
    builder.build(modules)
    return [entry[1] for entry in builder.functions], builder.classes


_EMPTY = object()


class Watch:
    """A snapshot of the grader's modules (``modules``: name -> module), taken now.

    ``changes()`` (a closure, made here) returns the accusations so far, as JSON objects
    like the guard's violations: one per changed name, each reported once."""

    def __init__(self, modules: dict, sandbox: str = "", tables: list = ()) -> None:
        builder = _Builder(modules)
        builder.build(modules)
        self.changes = _closure(builder, sandbox.rstrip("/") + "/" if sandbox else "", tuple(tables))
        self.size = builder.entries + sum(len(t[3]) for t in tables)


def _closure(builder: _Builder, sandbox: str, tables: tuple = ()):
    exact = tuple(builder.exact)
    kept = tuple(builder.kept)
    functions = tuple(builder.functions)
    is_, map_, all_, len_, id_, type_, str_, zip_, set_ = operator.is_, map, all, len, id, type, str, zip, set
    enumerate_, startswith, dict_items, function_type, empty = enumerate, str.startswith, dict.items, \
        types.FunctionType, _EMPTY
    runtime_names = RUNTIME_NAMES
    isinstance_, class_dict = isinstance, type.__dict__["__dict__"].__get__
    code_of = types.FunctionType.__code__.__get__
    defaults_of = types.FunctionType.__defaults__.__get__
    kwdefaults_of = types.FunctionType.__kwdefaults__.__get__
    cell_contents = types.CellType.cell_contents.__get__
    ValueError_ = ValueError
    dict_type = dict
    encode = _encode
    accusations: list[bytes] = []
    reported: set = set()

    def defined_at(obj) -> tuple:
        """Where a plain function was defined (relative to the learner's folder): ``obj``
        itself, or the first one in the class of ``obj`` (or in ``obj``, a class); else
        ("", 0).  Reads C slots and exact dicts only, never calling the object."""
        if type_(obj) is not function_type:
            cls = obj if isinstance_(obj, type_) else type_(obj)
            for member in class_dict(cls).values():
                if type_(member) is function_type:
                    obj = member
                    break
            else:
                return "", 0
        code = code_of(obj)
        file = code.co_filename
        if type_(file) is not str_:
            return "", 0
        if sandbox and startswith(file, sandbox):
            file = file[len_(sandbox):]
        return file, code.co_firstlineno

    def accuse(label: str, now, kind: bytes = b"grader_rebind") -> None:
        if label in reported:
            return
        reported.add(label)
        file, line = defined_at(now)
        accusations.append(b'{"kind":"%s","what":%s,"file":%s,"line":%d}' % (
            kind, encode(label).encode("ascii"), encode(file).encode("ascii"), line))

    def table_changes(label, table, key_names, snapshot, strict) -> None:
        """JAX's entries for its own primitives (``grader.sandbox.pins.rule_tables``): each
        still there, the same object; ``strict``: none added either."""
        if type_(table) is not dict_type and not isinstance_(table, dict_type):
            return
        present = 0
        for key, value in dict_items(table):
            k = id_(key)
            name = key_names.get(k, empty)
            if name is empty:
                continue  # a key of the learner's, or one JAX added for a primitive made later
            was = snapshot.get(k, empty)
            if was is empty:
                if strict:
                    accuse(label + "[" + name + "]", value, b"jax_rule")
                continue
            present += 1
            if value is not was:
                accuse(label + "[" + name + "]", value, b"jax_rule")
        if present != len_(snapshot):
            accuse(label, None, b"jax_rule")

    def name_of(label: str, key) -> str:
        return label + "." + key if type_(key) is str_ else label + ".<a key that is not a string>"

    def by_key_id(items) -> dict:
        now = {}
        for key, value in items:
            now[id_(key)] = value
        return now

    def namespace_changes(label, space, items, values, keys, snap_values, key_ids) -> None:
        """Names changed, added or removed.  Iterates the namespace's items only and compares
        identities: no key of the learner's is ever compared (its __eq__ never runs)."""
        extra = 0
        for key, value in items(space):
            if id_(key) not in key_ids:
                extra += 1
                if not (type_(key) is str_ and key in runtime_names):
                    accuse(name_of(label, key), value)
        if not extra and len_(space) == len_(keys) and all_(map_(is_, space, keys)):
            if all_(map_(is_, values(space), snap_values)):
                return
        now = by_key_id(items(space))
        for key, value in zip_(keys, snap_values):
            got = now.get(id_(key), empty)
            if got is not value:
                accuse(name_of(label, key), None if got is empty else got)

    def kept_changes(label, container, kind, snap) -> None:
        """Every entry there at snapshot time is still there, the same object (additions allowed)."""
        if kind == "list":
            if len_(container) < len_(snap) or not all_(map_(is_, container, snap)):
                accuse(label, None)
        elif kind == "set":
            ids = set_()
            for item in container:
                ids.add(id_(item))
            for item in snap:
                if id_(item) not in ids:
                    accuse(label, None)
                    return
        else:
            now = by_key_id(dict_items(container))
            for key, value in snap:
                got = now.get(id_(key), empty)
                if got is not value:
                    accuse(label + "[" + key + "]" if type_(key) is str_ else label,
                           None if got is empty else got)

    def function_changes(label, fn, code, defaults, kwdefaults, cells, contents) -> None:
        if code_of(fn) is not code:
            accuse(label + ".__code__", None)
        if defaults_of(fn) is not defaults:
            accuse(label + ".__defaults__", None)
        if kwdefaults_of(fn) is not kwdefaults:
            accuse(label + ".__kwdefaults__", None)
        for i, cell in enumerate_(cells):
            try:
                now = cell_contents(cell)
            except ValueError_:
                now = empty
            if now is not contents[i]:
                accuse(label + ".<closure>", None if now is empty else now)

    def changes() -> list:
        """Every change found so far (this request's and earlier ones')."""
        for entry in tables:
            table_changes(*entry)
        for entry in exact:
            namespace_changes(*entry)
        for label, container, kind, snap in kept:
            kept_changes(label, container, kind, snap)
        for entry in functions:
            function_changes(*entry)
        return accusations

    return changes
