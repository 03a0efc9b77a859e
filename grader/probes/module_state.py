"""What a learner's module holds, by content: to tell whether a call wrote to its globals.

A purity check that compares globals by identity, or containers by type and length, misses a
write made in place: ``STATE["steps"] += 1`` keeps the dict, its type and its length.  So each
global is fingerprinted by what it contains, recursively: builtin scalars by value, builtin
containers item by item, NumPy arrays by their bytes, and -- for classes and instances of classes
the learner's own module defines -- their attribute dicts; a library's container (a subclass of
dict, list, tuple or set -- ``defaultdict``, ``Counter``, a ``NamedTuple`` --, a ``deque``, a
``SimpleNamespace`` or ``argparse.Namespace``) by what it holds, read with the builtin type's own methods.

State need not sit in a global variable to last between calls, so three more places are read:
a function the learner's module defines, by its attributes (``step.calls += 1``) and the contents
of its closure cells (a ``nonlocal`` counter); a library wrapper of such a function (``jax.jit``'s,
``functools.lru_cache``'s: an object whose own ``__dict__`` holds ``__wrapped__``), by the function
it wraps; and a module (``jnp``, ``np``, a package and its submodules), by its *data* attributes
-- builtin scalars and containers, NumPy arrays -- by value or identity, so one added or rebound
(``jnp._calls = ...``) shows, while what a library binds lazily (submodules, functions, classes)
and what it keeps in its own caches in place (``re``'s) never does.  Anything else (a library
object, a JAX array, which cannot change in place) is fingerprinted by identity, so rebinding it
still shows.

No learner code runs while a fingerprint is taken: types are compared exactly (a subclass of
dict could override ``items``), attribute dicts are read through the C-level ``__dict__``
descriptor only, and nothing is compared with ``==`` but the plain tuples built here.  The walk
is bounded (``MAX_NODES`` per global, ``MAX_DEPTH`` deep): past the bound a value counts by identity
and length, so a huge global costs little and still shows a rebinding.
"""

from __future__ import annotations

import _random
import argparse
import builtins
import collections
import hashlib
import random
import sys
import types

import numpy as np

MAX_NODES = 5_000  # per global
MAX_DEPTH = 8
_SCALARS = (type(None), bool, int, float, complex, str, bytes)
_SEQUENCES = (list, tuple)
_SETS = (set, frozenset)
_GETSET = types.GetSetDescriptorType
_ndarray = np.ndarray
_deque = collections.deque
_namespace_dict = types.SimpleNamespace.__dict__["__dict__"].__get__
_FUNCTION = types.FunctionType
_MODULE = types.ModuleType
_function_dict = types.FunctionType.__dict__["__dict__"].__get__
_function_globals = types.FunctionType.__dict__["__globals__"].__get__
_function_closure = types.FunctionType.__dict__["__closure__"].__get__
_function_defaults = types.FunctionType.__dict__["__defaults__"].__get__
_function_kwdefaults = types.FunctionType.__dict__["__kwdefaults__"].__get__
_function_code = types.FunctionType.__dict__["__code__"].__get__
_CODE = types.CodeType
_sys_modules = sys.modules
_cell_contents = types.CellType.__dict__["cell_contents"].__get__
_module_dict = types.ModuleType.__dict__["__dict__"].__get__
#: what a module attribute must be to count as state: data, not code a library binds lazily
_DATA = _SCALARS + (list, tuple, dict, set, frozenset, bytearray, _ndarray)
_builtins = builtins
_py_random = random.Random
_py_random_state = _random.Random.getstate  # the C method: a subclass's getstate is never called
_np_random_state = np.random.RandomState
_np_random_get_state = np.random.RandomState.get_state
_np_random_module = np.random.mtrand
_random_module = random


class _Budget:
    __slots__ = ("left", "keep")

    def __init__(self, n: int, keep: list | None = None):
        self.left = n
        self.keep = keep if keep is not None else []  # every object pictured by its id, held alive


class Snapshot(dict):
    """``{global name: fingerprint}``, holding every object a fingerprint names by its ``id``:
    while the snapshot lives none of them is freed, so no new object can take its ``id`` (an
    array rebound in each call would otherwise land, freed and reallocated, where the last one
    was, and look unchanged)."""

    __slots__ = ("keep",)


def _own_dict(obj, owner: str):
    """``obj``'s attribute dict when ``obj`` is a class, or an instance of a class, defined in the
    module named ``owner`` (and its ``__dict__`` is the interpreter's own descriptor); else None."""
    if type(obj) is type:
        cls_dict = type.__dict__["__dict__"].__get__(obj, type)
        return cls_dict if cls_dict.get("__module__") == owner else None
    cls = type(obj)
    if type(cls) is not type:
        return None
    mro_dicts = [type.__dict__["__dict__"].__get__(k, type) for k in type.__dict__["__mro__"].__get__(cls, type)]
    if mro_dicts[0].get("__module__") != owner:
        return None
    for d in mro_dicts:
        if "__dict__" in d:
            desc = d["__dict__"]
            return desc.__get__(obj, cls) if type(desc) is _GETSET else None
    return None


def fingerprint(value, owner: str, budget: _Budget | None = None, depth: int = 0):
    """A plain, comparable picture of ``value``'s content (see the module docstring)."""
    budget = budget or _Budget(MAX_NODES)
    budget.left -= 1
    t = type(value)
    if t in _SCALARS:
        return ("v", t.__name__, repr(value)[:200] if t is not bytes else hashlib.sha1(value).hexdigest())
    budget.keep.append(value)
    if budget.left <= 0 or depth >= MAX_DEPTH:
        return ("deep", t.__name__, id(value), len(value) if t in (list, tuple, dict, set, frozenset) else -1)
    if t in _SEQUENCES:
        return (t.__name__, tuple(fingerprint(v, owner, budget, depth + 1) for v in list(value)))
    if t is bytearray:
        return ("bytearray", hashlib.sha1(bytes(value)).hexdigest())
    if t is dict:
        items = list(dict.items(value))
        return ("dict", tuple((fingerprint(k, owner, budget, depth + 1), fingerprint(v, owner, budget, depth + 1))
                              for k, v in items))
    if t in _SETS:
        members = [fingerprint(v, owner, budget, depth + 1) for v in list(value)]
        return (t.__name__, tuple(sorted(map(repr, members))))
    if t is _ndarray and not value.dtype.hasobject:
        digest = hashlib.sha1(np.ascontiguousarray(value).tobytes()).hexdigest()
        return ("ndarray", value.dtype.str, value.shape, digest)
    if t is _FUNCTION:
        return _function_picture(value, owner, budget, depth)
    if t is _MODULE:
        return _module_picture(value, depth, budget.keep)
    own = _own_dict(value, owner)
    if own is None:
        inside = _builtin_contents(value, t)
        if inside is None:
            wrapped = _wrapped_function(value)
            if wrapped is not None:  # jax.jit's or lru_cache's wrapper: the learner's function inside
                return ("wrapper", t.__name__, id(value), fingerprint(wrapped, owner, budget, depth + 1))
            return ("id", t.__name__, id(value))
        # a library's container (defaultdict, OrderedDict, Counter, deque, SimpleNamespace, a
        # NamedTuple): written in place as easily as a dict, so read by content too
        return ("contents", t.__name__, id(value), fingerprint(inside, owner, budget, depth + 1))
    attrs = [(k, v) for k, v in list(own.items()) if type(k) is str and not k.startswith("__")]
    inside = _builtin_contents(value, t)
    return ("attrs", id(value), tuple((k, fingerprint(v, owner, budget, depth + 1)) for k, v in attrs),
            None if inside is None else fingerprint(inside, owner, budget, depth + 1))


def _function_picture(fn, owner: str, budget: _Budget, depth: int):
    """A function of the learner's module by its attributes and its closure cells' contents;
    any other function by identity."""
    module_globals = _function_globals(fn)
    if type(module_globals) is not dict or dict.get(module_globals, "__name__") != owner:
        return ("id", "function", id(fn))
    attrs = [(k, v) for k, v in list(dict.items(_function_dict(fn))) if type(k) is str and not k.startswith("__")]
    # a mutable default (def bump(_state=[0])) lives as long as the function, as a global would
    attrs += [("(defaults)", _function_defaults(fn)), ("(keyword defaults)", _function_kwdefaults(fn))]
    cells = []
    for cell in _function_closure(fn) or ():
        try:
            cells.append(fingerprint(_cell_contents(cell), owner, budget, depth + 1))
        except ValueError:  # an empty cell (a name bound later)
            cells.append(("empty",))
    return ("function", id(fn), tuple((k, fingerprint(v, owner, budget, depth + 1)) for k, v in attrs), tuple(cells))


def _wrapped_function(value):
    """The function a library wrapper holds as ``__wrapped__`` in its own ``__dict__`` (read
    through the interpreter's descriptor, never by attribute lookup), or None."""
    inside = _instance_dict(value)
    wrapped = dict.get(inside, "__wrapped__") if type(inside) is dict else None
    return wrapped if type(wrapped) is _FUNCTION else None


def _module_picture(module, depth: int, keep: list):
    """A module by its data attributes (scalars by value, containers and arrays by identity),
    and, for a module the learner's module holds, each of its submodules likewise."""
    namespace = _module_dict(module)
    name = dict.get(namespace, "__name__")
    rows, subs = [], []
    for key, value in list(dict.items(namespace)):
        if type(key) is not str or key.startswith("__"):
            continue
        t = type(value)
        if t in _SCALARS:
            rows.append((key, t.__name__, repr(value)[:200] if t is not bytes else hashlib.sha1(value).hexdigest()))
        elif t in _DATA:
            keep.append(value)
            rows.append((key, t.__name__, id(value)))
        elif t is _MODULE and depth == 0 and type(name) is str:
            sub = dict.get(_module_dict(value), "__name__")
            if type(sub) is str and sub.startswith(name + "."):
                subs.append((key, _module_picture(value, depth + 1, keep)))
    return ("module", id(module), tuple(sorted(rows)), tuple(sorted(subs)))


def _builtin_contents(value, t):
    """The dict, list or tuple a learner's subclass of one holds, read by the builtin type's own C
    methods (an override of ``items`` or ``__iter__`` is not called); else None."""
    mro = type.__dict__["__mro__"].__get__(t, type)
    if dict in mro:
        return list(dict.items(value))  # pairs: building a dict would hash learner keys
    if list in mro:
        return list.copy(value)
    if tuple in mro:
        return tuple.__getitem__(value, slice(None))
    if _deque in mro:
        return list(_deque.__iter__(value))
    if set in mro or frozenset in mro:
        return tuple(sorted(repr(fingerprint(v, "", _Budget(50))) for v in (set if set in mro else frozenset).__iter__(value)))
    if types.SimpleNamespace in mro:
        return list(dict.items(_namespace_dict(value)))
    if argparse.Namespace in mro:  # an attribute bag, like SimpleNamespace
        for d in (type.__dict__["__dict__"].__get__(k, type) for k in mro):
            desc = d.get("__dict__")
            if type(desc) is _GETSET:
                inside = desc.__get__(value, t)
                return list(dict.items(inside)) if type(inside) is dict else None
    return None


def _imported_names(namespace: dict, owner: str) -> set:
    """Every name the code of the module's own functions uses (``co_names``, nested code objects
    included): a module imported inside a function (``import json``) is named there, though no
    global holds it."""
    names: set = set()
    functions = [v if type(v) is _FUNCTION else _wrapped_function(v) for v in list(dict.values(namespace))
                 if type(v) is not _MODULE and type(v) not in _SCALARS]  # jax.jit's wrapper: the function inside
    codes = [_function_code(f) for f in functions
             if type(f) is _FUNCTION and dict.get(_function_globals(f), "__name__") == owner]
    seen = 0
    while codes and seen < MAX_NODES:
        code = codes.pop()
        seen += 1
        names.update(n for n in code.co_names if type(n) is str)
        codes.extend(c for c in code.co_consts if type(c) is _CODE)
    return names


def _environment(keep: list):
    """The process environment's contents (``os.environ``: an object of the library's, holding
    a dict, read through the interpreter's descriptors): a place state can be kept in."""
    os_module = dict.get(_module_dict(_sys_modules["os"]), "environ") if "os" in _sys_modules else None
    inside = _instance_dict(os_module)
    data = dict.get(inside, "_data") if type(inside) is dict else None
    if type(data) is not dict:
        return ("id", type(os_module).__name__, id(os_module))
    keep.append(data)
    return ("environ", tuple(sorted((repr(k)[:200], repr(v)[:200]) for k, v in list(dict.items(data)))[:MAX_NODES]))


def _generator_state(value, t):
    """The state of one of the two process-wide random generators -- Python's ``random.Random``,
    NumPy's legacy ``RandomState`` -- read by the C code of its exact class, as a digest; else
    None (a generator put in their place shows by its identity).  A generator a module holds for
    itself counts by identity, as any library object does: drawing from one's own generator
    beside a step is everyday code."""
    try:
        if t is _py_random:
            return hashlib.sha1(repr(_py_random_state(value)).encode()).hexdigest()
        if t is _np_random_state:
            name, keys, pos, has_gauss, gauss = _np_random_get_state(value)
            return (name, hashlib.sha1(np.ascontiguousarray(keys).tobytes()).hexdigest(), int(pos), int(has_gauss),
                    float(gauss))
    except Exception:  # noqa: BLE001 - an unreadable generator counts by identity
        return None
    return None


def _hidden_state(keep: list) -> dict:
    """Three places a call can keep state that no global of the module holds, each as a
    picture: the builtins module's entries, by content (``(builtins)``); what ``sys.modules``
    holds that no import made -- an object, or a module with no spec -- by content
    (``(sys.modules)``); and the global random generators of Python and NumPy, by state
    (``(random)``).  A module imported during a call is not state (a lazy import)."""
    namespace = _module_dict(_builtins)
    pictures = {"(builtins)": tuple((key, fingerprint(value, "builtins", _Budget(MAX_NODES, keep)))
                                    for key, value in sorted(dict.items(namespace), key=lambda kv: repr(kv[0]))
                                    if type(key) is not str or not key.startswith("__"))}
    foreign = []
    for name, value in list(dict.items(_sys_modules)):
        if isinstance(value, _MODULE) and (type(value) is not _MODULE or name == "__main__" or
                                           dict.get(_module_dict(value), "__spec__") is not None):
            continue  # imported (a spec), a library's lazy module (a subclass), or the worker's own
        if type(value) is _MODULE:  # made by hand: its data, by content
            value = [(k, v) for k, v in list(dict.items(_module_dict(value)))
                     if type(k) is str and not k.startswith("__") and type(v) in _DATA]
        foreign.append((repr(name)[:200], fingerprint(value, "", _Budget(MAX_NODES, keep))))
    pictures["(sys.modules)"] = tuple(sorted(foreign))
    globals_ = [dict.get(_module_dict(_random_module), "_inst"), dict.get(_module_dict(_np_random_module), "_rand")]
    pictures["(random)"] = tuple((type(g).__name__, id(g), _generator_state(g, type(g))) for g in globals_)
    keep.extend(globals_)
    return pictures


def _instance_dict(obj):
    """``obj``'s instance dict through the interpreter's own descriptor, or None."""
    t = type(obj)
    for klass in type.__dict__["__mro__"].__get__(t, type):
        desc = type.__dict__["__dict__"].__get__(klass, type).get("__dict__")
        if desc is not None:
            return desc.__get__(obj, t) if type(desc) is _GETSET else None
    return None


def snapshot(module) -> Snapshot:
    """``{global name: fingerprint}`` of ``module``'s globals (dunder names left out), each within
    its own budget (so one global's growth changes no other's picture); and, under names in
    parentheses, two places no global holds: each module that the module's functions name in
    their code (imported inside a function) and is loaded, by its data attributes
    (``(module json)``), the process environment (``(os.environ)``), and the builtins, what
    ``sys.modules`` holds that no import made, and the global random generators
    (``_hidden_state``)."""
    namespace = vars(module)
    owner = namespace.get("__name__")
    keep: list = []
    out = Snapshot((name, fingerprint(value, owner, _Budget(MAX_NODES, keep))) for name, value in
                   list(namespace.items()) if type(name) is str and not name.startswith("__"))
    held = {id(v) for v in list(dict.values(namespace)) if type(v) is _MODULE}
    for name in sorted(_imported_names(namespace, owner)):
        loaded = _sys_modules.get(name)
        if type(loaded) is _MODULE and id(loaded) not in held:
            out[f"(module {name})"] = _module_picture(loaded, 1, keep)  # its submodules are not state
    out["(os.environ)"] = _environment(keep)
    out.update(_hidden_state(keep))
    out.keep = keep
    return out


def changed(before: dict, after: dict) -> list[str]:
    """The global names whose fingerprint differs (bound, rebound, unbound or written in place)."""
    return sorted(name for name in set(before) | set(after) if before.get(name) != after.get(name))
