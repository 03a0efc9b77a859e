"""Freeze the grader's code in a sandbox worker: every global name it reads becomes a constant.

The grader's modules stay reachable from the learner's code through the class graph
(``object.__subclasses__()``, then a method's ``__globals__``: no audit event covers either,
``grader.sandbox.namespaces``).  The namespace snapshot accuses a change that lasts until the
request ends, but a replacement the probe calls *and that puts the original back* leaves
nothing to compare.  So, right before learner code can exist, the worker rewrites the code of
every grader function it can reach (``namespaces.grader_functions``; nested functions,
comprehensions and lambdas with them): each ``LOAD_GLOBAL`` of a name bound at that moment
(a module global, or a builtin) becomes ``LOAD_CONST`` of the object it names, and an
attribute read on a constant that is one of the grader's modules (``ir.primitive_counts``)
is folded in too, and so is a name imported inside a function from one of them (``from
grader.ir import tally``: ``IMPORT_FROM`` becomes ``LOAD_CONST``; the import still runs).
From then on nothing the learner rebinds -- in a grader module, in ``builtins``, in
``sys.modules`` -- changes what the grader's code calls; the objects themselves are the same,
so the code does exactly what it did.

The libraries the probes measure through get the same treatment, once per zygote before it
forks (``library``, ``grader.sandbox.worker.import_harness``): every live function of JAX,
jaxlib, optax and Equinox -- found through the garbage collector, so one only a decorator or
a registry holds is among them -- so that a file cannot rebind ``jax._src.pjit.jit_trace`` (or
any function JAX calls through its module) to show a probe a decoy program.  Modules frozen
once stay *fixed* for later freezes in the process (``_PARSED.modules``): the grader's reads of
``jax.numpy.float32`` fold too.

What is left as it was: names some function of a module assigns with ``global`` (read afresh
there, wherever they are read: JAX's caches and lazily made backends are such names), names
not bound yet (a lazily loaded attribute), values that cannot be a constant (unhashable ones
other than plain dicts, lists and sets: arrays, a dict inside a tuple), attribute reads on
anything but a frozen module, and class attributes (``self.x``: ``seal`` below makes the
grader's classes, and ``grader.sandbox.pins`` JAX's measured ones, immutable instead).  Why
this is semantics-preserving: a grader module's namespace does not change once the snapshot
is taken -- any change is an accusation -- and a library rebinds its module globals only with
``global`` (its other names are set once, at import), so a name's value at freezing time is its
value for the worker's whole life.  Honest code that monkeypatches JAX's internals changes
what its own code calls, not what JAX calls.

The rewrite keeps every instruction's length (the replaced instruction's inline caches become
``NOP``), so jump targets, the exception table and the line table stay valid; an attribute
read is folded only when nothing jumps to it.  The code is searched, not disassembled (a
regular expression over its opcode bytes: 0.35 s for the libraries' 14,600 functions, in C
mostly), and a test holds the search to ``dis`` on JAX's own code.  It knows
CPython 3.11's bytecode only; on another version ``freeze`` changes nothing and says so, and
the snapshot alone stands (the README's threat model says which).
"""

from __future__ import annotations

import dis
import gc
import importlib.util
import inspect
import opcode
import re
import sys
import types
import typing

SUPPORTED = sys.version_info[:2] == (3, 11)

_OP = opcode.opmap
_EXTENDED_ARG = opcode.EXTENDED_ARG
if SUPPORTED:
    _CACHES = opcode._inline_cache_entries  # noqa: SLF001 - 3.11's inline cache sizes, by opcode
    _LOAD_GLOBAL, _LOAD_CONST, _LOAD_ATTR, _LOAD_METHOD = (_OP[n] for n in ("LOAD_GLOBAL", "LOAD_CONST",
                                                                           "LOAD_ATTR", "LOAD_METHOD"))
    _IMPORT_NAME, _IMPORT_FROM, _SWAP, _POP_TOP = (_OP[n] for n in ("IMPORT_NAME", "IMPORT_FROM", "SWAP", "POP_TOP"))
    _PUSH_NULL, _NOP = _OP["PUSH_NULL"], _OP["NOP"]
    _STORES = frozenset({_OP["STORE_GLOBAL"], _OP["DELETE_GLOBAL"]})
    _STORE_ANY = frozenset(_OP[n] for n in ("STORE_FAST", "STORE_NAME", "STORE_GLOBAL", "STORE_DEREF"))
    _LOAD_FAST, _STORE_FAST, _DELETE_FAST = (_OP[n] for n in ("LOAD_FAST", "STORE_FAST", "DELETE_FAST"))
    _JUMPS = tuple(dis.hasjrel) + tuple(dis.hasjabs)
    _BACKWARD = frozenset(op for op in dis.hasjrel if "BACKWARD" in opcode.opname[op])
    # the opcodes ``_parsed`` looks for, found in one pass over a code object's opcodes
    _SITES = re.compile(b"[" + b"".join(re.escape(bytes((op,))) for op in (_LOAD_GLOBAL, _IMPORT_NAME, *_STORES)) + b"]")
    _NOP_UNIT = bytes((_NOP, 0))


def _units(ops: bytes, op: int):
    """The units (two-byte code units) whose opcode is ``op``.  ``co_code`` holds an
    instruction's opcode in its unit's first byte and zero in its inline caches' (CPython
    deoptimises the code it hands out), so a match in ``ops`` -- every first byte -- is exact."""
    want = bytes((op,))
    unit = ops.find(want)
    while unit >= 0:
        yield unit
        unit = ops.find(want, unit + 1)


def _at(ops: bytes, args: bytes, unit: int) -> tuple[int, int, int, int]:
    """(first unit, end unit, opcode, argument) of the instruction whose opcode is at ``unit``
    (its EXTENDED_ARG prefixes and inline caches are inside the span)."""
    op, arg, start, shift = ops[unit], args[unit], unit, 8
    while start > 0 and ops[start - 1] == _EXTENDED_ARG:
        start -= 1
        arg |= args[start] << shift
        shift += 8
    return start, unit + 1 + _CACHES[op], op, arg


def _from(ops: bytes, args: bytes, unit: int) -> tuple[int, int, int, int, int]:
    """``_at`` of the instruction that starts at ``unit``, and the unit of its opcode."""
    real = unit
    while real < len(ops) - 1 and ops[real] == _EXTENDED_ARG:
        real += 1
    return (*_at(ops, args, real), real)


#: ``.table``: id(code) -> (code, ``_Parsed``), filled by ``prepare`` before a zygote forks (its
#: workers share it) and emptied by ``freeze``.  ``.modules`` (name -> module) and ``.keep``
#: (id of a module's namespace -> the names some function assigns there with ``global``): what
#: earlier freezes in this process froze, which later ones treat as fixed too.  Held in an
#: object the namespace snapshot does not walk (thousands of entries it would read for nothing).
_PARSED = types.SimpleNamespace(table={}, modules={}, keep={})


class _Parsed(typing.NamedTuple):
    ops: bytes  # each unit's opcode (0: an inline cache)
    args: bytes  # each unit's argument byte
    sites: tuple  # units of the LOAD_GLOBAL and IMPORT_NAME opcodes, in order
    globals_stored: frozenset  # names assigned or deleted with ``global``


def _parsed(code: types.CodeType) -> _Parsed:
    """What ``freeze`` needs to know of ``code``'s bytecode, parsed once (in C, mostly: a
    search of its opcodes for the few that matter)."""
    entry = _PARSED.table.get(id(code))
    if entry is not None and entry[0] is code:
        return entry[1]
    raw = code.co_code
    ops, args = raw[0::2], raw[1::2]
    sites, stored = [], set()
    for found in _SITES.finditer(ops):
        unit = found.start()
        if ops[unit] in _STORES:
            stored.add(code.co_names[_at(ops, args, unit)[3]])
        else:
            sites.append(unit)
    parsed = _Parsed(ops, args, tuple(sites), frozenset(stored))
    _PARSED.table[id(code)] = (code, parsed)
    return parsed


def _targets(code: types.CodeType, parsed: _Parsed) -> frozenset:
    """The units something jumps to (a jump, an exception handler): computed only for code
    whose folding needs them."""
    ops, args = parsed.ops, parsed.args
    out = set()
    for op in _JUMPS:
        for unit in _units(ops, op):
            arg = _at(ops, args, unit)[3]
            out.add(arg if op in dis.hasjabs else unit + 1 - arg if op in _BACKWARD else unit + 1 + arg)
    out.update(entry.target // 2 for entry in dis._parse_exception_table(code))  # noqa: SLF001 - 3.11's table
    return frozenset(out)


def _stored_names(code: types.CodeType, into: set) -> None:
    """Every name ``code`` (and the code nested in it) assigns or deletes with ``global``."""
    into.update(_parsed(code).globals_stored)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _stored_names(const, into)


def _constant(value) -> bool:
    """Whether ``value`` may stand in a code object's constants: a plain container or a
    read-only view of one (``grader.sandbox.pins``'s tables; the name
    stays bound to the same one; its entries are the snapshot's to compare), or anything
    hashable -- a code object is compared and hashed by its constants, and an array's ``==``
    has no truth value."""
    if type(value) in (dict, list, set, types.MappingProxyType):
        return True
    try:
        hash(value)
    except Exception:  # noqa: BLE001 - unhashable (an array, a dict inside a tuple): left as it is
        return False
    return True


def _emit(index: int, null: bool) -> bytes:
    """``[PUSH_NULL,] LOAD_CONST index`` as code units."""
    out = bytearray((_PUSH_NULL, 0)) if null else bytearray()
    for shift in (24, 16, 8):
        if index >> shift:
            out += bytes((_EXTENDED_ARG, (index >> shift) & 0xFF))
    out += bytes((_LOAD_CONST, index & 0xFF))
    return bytes(out)


class _Freezer:
    def __init__(self, modules: dict, keep: dict) -> None:
        self.by_name = modules  # name -> module: what an import inside a function is resolved against
        self.modules = frozenset(id(m) for m in modules.values())
        self.keep = keep  # id(namespace) -> names read afresh there (assigned with `global` somewhere)
        self.done: dict[tuple[int, int], types.CodeType] = {}  # (id(code), id(globals)) -> frozen code
        self.names = 0

    def fixed(self, module, attr: str) -> bool:
        """Whether ``module.attr`` is one of the frozen modules' names that nothing reassigns."""
        return (type(module) is types.ModuleType and id(module) in self.modules
                and attr in vars(module) and attr not in self.keep.get(id(vars(module)), ())
                and _constant(vars(module)[attr]))

    def code(self, code: types.CodeType, space: dict, builtins: dict) -> types.CodeType:
        """``code`` with its global reads (and those of the code nested in it) made constants."""
        key = (id(code), id(space))
        if key in self.done:
            return self.done[key]
        consts = list(code.co_consts)
        for i, const in enumerate(consts):
            if isinstance(const, types.CodeType):
                consts[i] = self.code(const, space, builtins)
        rewrite = _Rewrite(self, code, consts, space)
        keep = self.keep.get(id(space), ())
        ops, args = rewrite.ops, rewrite.args
        locals_bound: dict[int, object] = {}  # local slot -> the frozen module an import bound it to
        for site in rewrite.parsed.sites:
            if ops[site] == _IMPORT_NAME:
                locals_bound.update(rewrite.imports(site))
                continue
            start, end, _, arg = _at(ops, args, site)
            name, null = code.co_names[arg >> 1], bool(arg & 1)
            if name in keep:
                continue
            if name in space:
                value = space[name]
            elif name in builtins:
                value = builtins[name]
            else:
                continue  # unbound now: a NameError stays a NameError
            value, end, null = rewrite.chain(value, end, null)
            if _constant(value):
                rewrite.put(start, end, value, null)
        rewrite.module_locals(locals_bound)
        frozen = rewrite.result()
        self.done[key] = frozen
        return frozen


class _Rewrite:
    """One code object being rewritten (its units, its constants as they grow)."""

    def __init__(self, freezer: _Freezer, code: types.CodeType, consts: list, space: dict) -> None:
        self.freezer, self.code, self.consts, self.space = freezer, code, consts, space
        self.parsed = _parsed(code)
        self.ops, self.args = self.parsed.ops, self.parsed.args
        self.raw = bytearray(code.co_code)
        self.added: dict[int, int] = {}
        self.changed = consts != list(code.co_consts)
        self._targets = None

    def result(self) -> types.CodeType:
        return self.code.replace(co_code=bytes(self.raw), co_consts=tuple(self.consts)) if self.changed else self.code

    def put(self, start: int, end: int, value, null: bool) -> bool:
        """Units ``start:end`` become ``[PUSH_NULL,] LOAD_CONST value`` and ``NOP``s (same length)."""
        if id(value) not in self.added:
            self.added[id(value)] = len(self.consts)
            self.consts.append(value)
        units = _emit(self.added[id(value)], null)
        if len(units) > 2 * (end - start):
            return False
        self.raw[2 * start:2 * end] = units + _NOP_UNIT * (end - start - len(units) // 2)
        self.freezer.names += 1
        self.changed = True
        return True

    def chain(self, value, end: int, null: bool):
        """Fold the attribute reads that follow a read of ``value`` ending at unit ``end``
        (``ir.primitive_counts``: LOAD_ATTR, with or without a NULL below -- 3.11 calls an
        imported module's function so -- or LOAD_METHOD without one) while ``value`` is a
        frozen module whose attribute is fixed and nothing jumps to the read.
        Returns (value, end, null) for what the folded instructions push."""
        ops, args, names = self.ops, self.args, self.code.co_names
        while type(value) is types.ModuleType and id(value) in self.freezer.modules and end < len(ops):
            nstart, nend, nop, narg, nreal = _from(ops, args, end)
            if not (nop == _LOAD_ATTR or (nop == _LOAD_METHOD and not null)):
                break
            attr = names[narg]
            if not self.freezer.fixed(value, attr):
                break
            if self._targets is None:
                self._targets = _targets(self.code, self.parsed)
            if any(unit in self._targets for unit in range(nstart, nreal + 1)):
                break
            value, end = vars(value)[attr], nend
            if nop == _LOAD_METHOD:  # [NULL, attribute]: what it pushes for a module's function
                null = True
                break
        return value, end, null

    def imports(self, site: int) -> dict:
        """Fold the ``IMPORT_FROM``s of the import statement at ``site`` (an ``IMPORT_NAME``):
        ``from m import a`` and ``import m.a as a`` inside a function find ``m`` in ``sys.modules``
        (which learner code can change) each time they run; each becomes the object ``a`` names
        now, when ``m`` is a frozen module.  The import itself still runs, as before.  Returns
        {local slot: module} for each frozen module the statement stores in a local."""
        ops, args, code = self.ops, self.args, self.code
        start, end, _, arg = _at(ops, args, site)
        if start < 2 or ops[start - 1] != _LOAD_CONST:
            return {}
        before, _, _, fromlist = _at(ops, args, start - 1)
        if before < 1 or ops[before - 1] != _LOAD_CONST:
            return {}  # not [LOAD_CONST level, LOAD_CONST fromlist, IMPORT_NAME]: left as it is
        level, fromlist = code.co_consts[_at(ops, args, before - 1)[3]], code.co_consts[fromlist]
        name = code.co_names[arg]
        try:
            name = importlib.util.resolve_name("." * level + name, self.space.get("__package__")) if level else name
        except (ImportError, ValueError, TypeError):
            return {}
        module = self.freezer.by_name.get(name if fromlist is not None else name.partition(".")[0])
        bound: dict = {}
        unit = end
        if fromlist is None and module is not None:  # `import jax` -> the local `jax`
            _, after, nop, narg, _ = _from(ops, args, unit)
            if nop == _STORE_FAST:
                bound[narg] = module
        while module is not None and unit < len(ops):
            istart, iend, op, iarg, _ = _from(ops, args, unit)
            if op != _IMPORT_FROM:
                break
            attr = code.co_names[iarg]
            value = vars(module)[attr] if self.freezer.fixed(module, attr) else None
            if value is not None:
                self.put(istart, iend, value, False)
            unit = iend
            _, after, nop, narg, _ = _from(ops, args, unit)
            if nop == _STORE_FAST and type(value) is types.ModuleType and id(value) in self.freezer.modules:
                bound[narg] = value  # `from jax._src import pjit` -> the local `pjit`
            if fromlist is not None and nop in _STORE_ANY:  # from m import a, b: the module stays on the stack
                unit = after
            elif fromlist is None and nop == _SWAP and narg == 2 and ops[after] == _POP_TOP:
                module, unit = value, after + 1  # import m.a.b as c: on to `a`
            else:
                break
        return bound

    def module_locals(self, bound: dict) -> None:
        """A local that an import inside the function binds to a frozen module, and that nothing
        else assigns or deletes, is that module wherever it is read: fold the attribute reads
        off it (``from jax._src import pjit`` ... ``pjit._resolve_and_lower``) as off a global."""
        if not bound:
            return
        ops, args = self.ops, self.args
        writes: dict[int, int] = {}
        for op in (_STORE_FAST, _DELETE_FAST):
            for unit in _units(ops, op):
                slot = _at(ops, args, unit)[3]
                writes[slot] = writes.get(slot, 0) + 1
        code = self.code
        params = (code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & inspect.CO_VARARGS)
                  + bool(code.co_flags & inspect.CO_VARKEYWORDS))
        for slot, module in bound.items():
            if writes.get(slot) != 1 or slot < params:  # a parameter has a value before the import
                continue
            for unit in _units(ops, _LOAD_FAST):
                start, end, _, arg = _at(ops, args, unit)
                if arg != slot:
                    continue
                value, end, null = self.chain(module, end, False)
                if value is not module:
                    self.put(start, end, value, null)


def prepare(functions) -> None:
    """Parse the code of ``functions`` (the grader's) now: a zygote does it once, before it
    forks, for every worker it starts (``grader.sandbox.worker.import_harness``)."""
    if SUPPORTED:
        for fn in functions:
            if type(fn) is types.FunctionType:
                _parse_all(fn.__code__)


def _parse_all(code: types.CodeType) -> None:
    _parsed(code)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _parse_all(const)


_HEAPTYPE, _IMMUTABLETYPE = 1 << 9, 1 << 8  # CPython's Py_TPFLAGS_HEAPTYPE, Py_TPFLAGS_IMMUTABLETYPE


def _flags_word():
    """``type -> its tp_flags word`` as a ctypes view, or ``None`` where the word cannot be found
    for certain: the offset is the one where every sample type's word equals its ``__flags__``."""
    import ctypes

    class _Sample:
        pass

    samples = (_Sample, int, dict, type, types.FunctionType)
    offsets = [o for o in range(0, 512, ctypes.sizeof(ctypes.c_ulong))
               if all(ctypes.c_ulong.from_address(id(t) + o).value == t.__flags__ for t in samples)]
    if len(offsets) != 1:
        return None
    offset = offsets[0]
    return lambda cls: ctypes.c_ulong.from_address(id(cls) + offset)


def seal(classes) -> int:
    """Make each of ``classes`` (the grader's) an immutable type, as CPython's own built-in
    types are: setting or deleting one of its attributes (``Meter.count = fake``, its methods
    included) raises ``TypeError``, and so does assigning it to an object's ``__class__``.

    A method is looked up on its class each time it is called (``self.method()``), so without
    this a learner could replace one and put it back before the snapshot is compared, as with
    a global before ``freeze``.  Nothing in the grader sets a class attribute once its modules
    are imported: every test and ``grade verify`` run with the classes sealed.  Run before the
    guard, which refuses ``ctypes`` to everyone after it.  Returns how many classes were sealed
    (0: not supported)."""
    if not SUPPORTED:
        return 0
    word = _flags_word()
    if word is None:
        return 0
    sealed = 0
    for cls in classes:
        if isinstance(cls, type) and cls.__flags__ & _HEAPTYPE and not cls.__flags__ & _IMMUTABLETYPE:
            flags = word(cls)
            flags.value |= _IMMUTABLETYPE
            sealed += 1
    return sealed


def freeze(modules: dict, functions) -> int:
    """Rewrite ``functions`` (reachable from ``modules``: name -> module) so their global reads
    are constants; returns how many reads were frozen (0: not supported).  Modules frozen by an
    earlier call in this process (JAX's, in a zygote: ``library``) count as fixed here too: an
    attribute read on one, or an import from one, is folded like one on ``modules``."""
    if not SUPPORTED:
        return 0
    functions = [fn for fn in functions if type(fn) is types.FunctionType]
    keep = {space: set(names) for space, names in _PARSED.keep.items()}
    for fn in functions:
        _stored_names(fn.__code__, keep.setdefault(id(fn.__globals__), set()))
    _PARSED.modules.update(modules)
    _PARSED.keep.update(keep)
    freezer = _Freezer(dict(_PARSED.modules), keep)
    collecting = gc.isenabled()
    gc.disable()  # it makes thousands of objects and no cycles: a collection would only cost time
    try:
        for fn in functions:
            frozen = freezer.code(fn.__code__, fn.__globals__, fn.__builtins__)
            if frozen is not fn.__code__:
                fn.__code__ = frozen
        _PARSED.table.clear()  # nothing of it is needed again
    finally:
        if collecting:
            gc.enable()
    return freezer.names


#: the packages whose code a JAX worker freezes before learner code exists, and whose
#: primitives and rules ``grader.sandbox.pins`` pins: the probes measure through them (tracing,
#: lowering, compiling, cost analysis; exercise 7's reference optimizer; Equinox's primitives)
LIBRARIES = ("jax", "jaxlib", "optax", "equinox")


def library_modules(prefixes: tuple = LIBRARIES) -> dict:
    """The loaded modules of the packages ``prefixes``, by name (those with a plain namespace)."""
    dotted = tuple(p + "." for p in prefixes)
    return {n: m for n, m in sorted(sys.modules.items())
            if (n in prefixes or n.startswith(dotted)) and type(getattr(m, "__dict__", None)) is dict}


def library(prefixes: tuple = LIBRARIES) -> tuple[dict, list]:
    """The loaded modules of the packages ``prefixes`` (name -> module), and every live function
    whose globals are one of theirs: found through the garbage collector, so a function only a
    decorator, a registry or a closure holds is among them too, and so are the names it assigns
    with ``global`` (which ``freeze`` then leaves read afresh, everywhere they are read)."""
    modules = library_modules(prefixes)
    spaces = {id(vars(m)) for m in modules.values()}
    return modules, [o for o in gc.get_objects() if type(o) is types.FunctionType and id(o.__globals__) in spaces]
