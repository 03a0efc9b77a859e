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
is folded in too.  From then on nothing the learner rebinds -- in a grader module, in
``builtins`` -- changes what the grader's code calls; the objects themselves are the same,
so the code does exactly what it did.

What is left as it was: names some grader function assigns with ``global`` (read afresh),
names not bound yet, values that cannot be a constant (unhashable ones other than plain
dicts, lists and sets: arrays, a dict inside a tuple), attribute reads on anything but a
grader module (a library module's attributes may be rebound by the library itself, and
honest code may monkeypatch JAX), and class attributes (``self.x``: ``seal`` below makes the
grader's classes immutable instead).  Why this is
semantics-preserving: a grader module's namespace does not change once the snapshot is
taken -- any change is an accusation -- so a name's value at freezing time is its value for
the worker's whole life.

The rewrite keeps every instruction's length (the replaced instruction's inline caches become
``NOP``), so jump targets, the exception table and the line table stay valid.  It knows
CPython 3.11's bytecode only; on another version ``freeze`` changes nothing and says so, and
the snapshot alone stands (the README's threat model says which).
"""

from __future__ import annotations

import dis
import opcode
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
    _PUSH_NULL, _NOP = _OP["PUSH_NULL"], _OP["NOP"]
    _STORES = frozenset({_OP["STORE_GLOBAL"], _OP["DELETE_GLOBAL"]})


def _instructions(code: bytes):
    """(first unit, end unit, opcode, argument) for each instruction of ``code`` (units of two
    bytes; an instruction's EXTENDED_ARG prefixes and inline caches are inside its span)."""
    out = []
    n = len(code) // 2
    i = 0
    while i < n:
        start, arg = i, 0
        op = code[2 * i]
        while op == _EXTENDED_ARG:
            arg = (arg | code[2 * i + 1]) << 8
            i += 1
            op = code[2 * i]
        arg |= code[2 * i + 1]
        i += 1 + _CACHES[op]
        out.append((start, i, op, arg))
    return out


#: ``.table``: id(code) -> (code, ``_Parsed``), filled by ``prepare`` before a zygote forks (its
#: workers share it) and emptied by ``freeze``.  Held in an object the namespace snapshot does
#: not walk (thousands of entries it would read for nothing).
_PARSED = types.SimpleNamespace(table={})


class _Parsed(typing.NamedTuple):
    instructions: list  # ``_instructions``
    targets: frozenset  # byte offsets something jumps to (jumps, exception handlers)
    globals_read: tuple  # indexes of the LOAD_GLOBAL instructions
    globals_stored: frozenset  # names assigned or deleted with ``global``


def _parsed(code: types.CodeType) -> _Parsed:
    """What ``freeze`` needs to know of ``code``'s bytecode, parsed once."""
    entry = _PARSED.table.get(id(code))
    if entry is not None and entry[0] is code:
        return entry[1]
    ins = _instructions(code.co_code)
    targets = set(dis.findlabels(code.co_code))
    targets.update(e.target for e in dis._parse_exception_table(code))  # noqa: SLF001 - 3.11's table
    parsed = _Parsed(ins, frozenset(targets), tuple(k for k, item in enumerate(ins) if item[2] == _LOAD_GLOBAL),
                     frozenset(code.co_names[arg] for _, _, op, arg in ins if op in _STORES))
    _PARSED.table[id(code)] = (code, parsed)
    return parsed


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


def _emit(index: int, null: bool) -> list[tuple[int, int]]:
    """``[PUSH_NULL,] LOAD_CONST index`` as (opcode, argument) units."""
    out = [(_PUSH_NULL, 0)] if null else []
    for shift in (24, 16, 8):
        if index >> shift:
            out.append((_EXTENDED_ARG, (index >> shift) & 0xFF))
    out.append((_LOAD_CONST, index & 0xFF))
    return out


class _Freezer:
    def __init__(self, modules: dict, keep: frozenset) -> None:
        self.modules = frozenset(id(m) for m in modules.values())
        self.keep = keep  # names read afresh (assigned with `global` somewhere)
        self.done: dict[tuple[int, int], types.CodeType] = {}  # (id(code), id(globals)) -> frozen code
        self.names = 0

    def code(self, code: types.CodeType, space: dict, builtins: dict) -> types.CodeType:
        """``code`` with its global reads (and those of the code nested in it) made constants."""
        key = (id(code), id(space))
        if key in self.done:
            return self.done[key]
        consts = list(code.co_consts)
        for i, const in enumerate(consts):
            if isinstance(const, types.CodeType):
                consts[i] = self.code(const, space, builtins)
        raw = bytearray(code.co_code)
        ins, targets, sites, _ = _parsed(code)
        added: dict[int, int] = {}
        changed = consts != list(code.co_consts)

        def const_index(value) -> int:
            if id(value) not in added:
                added[id(value)] = len(consts)
                consts.append(value)
            return added[id(value)]

        for site in sites:
            start, end, _, arg = ins[site]
            k = site + 1
            name, null = code.co_names[arg >> 1], bool(arg & 1)
            if name in self.keep:
                continue
            if name in space:
                value = space[name]
            elif name in builtins:
                value = builtins[name]
            else:
                continue  # unbound now: a NameError stays a NameError
            # `ir.primitive_counts`: an attribute of one of the grader's modules, read off its dict
            # (LOAD_ATTR, after a LOAD_GLOBAL with or without NULL -- 3.11 calls an imported
            # module's function so -- or LOAD_METHOD, after one without)
            while k < len(ins) and (ins[k][2] == _LOAD_ATTR or (ins[k][2] == _LOAD_METHOD and not null)) \
                    and type(value) is types.ModuleType and id(value) in self.modules:
                nstart, nend, nop, narg = ins[k]
                attr = code.co_names[narg]
                if 2 * nstart in targets or attr not in vars(value) or not _constant(vars(value)[attr]):
                    break
                value, end = vars(value)[attr], nend
                k += 1
                if nop == _LOAD_METHOD:  # [NULL, attribute]: what it pushes for a module's function
                    null = True
                    break
            if not _constant(value):
                continue
            units = _emit(const_index(value), null)
            if len(units) > end - start:
                continue
            units += [(_NOP, 0)] * (end - start - len(units))
            for j, (o, a) in enumerate(units):
                raw[2 * (start + j)] = o
                raw[2 * (start + j) + 1] = a
            changed = True
            self.names += 1
        frozen = code.replace(co_code=bytes(raw), co_consts=tuple(consts)) if changed else code
        self.done[key] = frozen
        return frozen


def _parse_all(code: types.CodeType) -> None:
    _parsed(code)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _parse_all(const)


def prepare(functions) -> None:
    """Parse the code of ``functions`` (the grader's) now: a zygote does it once, before it
    forks, for every worker it starts (``grader.sandbox.worker.import_harness``)."""
    if SUPPORTED:
        for fn in functions:
            if type(fn) is types.FunctionType:
                _parse_all(fn.__code__)


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
    """Rewrite ``functions`` (the grader's, reachable from ``modules``: name -> module) so
    their global reads are constants; returns how many reads were frozen (0: not supported)."""
    if not SUPPORTED:
        return 0
    functions = [fn for fn in functions if type(fn) is types.FunctionType]
    keep: set = set()
    for fn in functions:
        _stored_names(fn.__code__, keep)
    freezer = _Freezer(modules, frozenset(keep))
    for fn in functions:
        frozen = freezer.code(fn.__code__, fn.__globals__, fn.__builtins__)
        if frozen is not fn.__code__:
            fn.__code__ = frozen
    _PARSED.table.clear()  # nothing of it is needed again
    return freezer.names
