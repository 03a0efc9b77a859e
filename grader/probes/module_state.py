"""What a learner's module holds, by content: to tell whether a call wrote to its globals.

A purity check that compares globals by identity, or containers by type and length, misses a
write made in place: ``STATE["steps"] += 1`` keeps the dict, its type and its length.  So each
global is fingerprinted by what it contains, recursively: builtin scalars by value, builtin
containers item by item, NumPy arrays by their bytes, and -- for classes and instances of classes
the learner's own module defines -- their attribute dicts; a library's container (a subclass of
dict, list, tuple or set -- ``defaultdict``, ``Counter``, a ``NamedTuple`` --, a ``deque``, a
``SimpleNamespace`` or ``argparse.Namespace``) by what it holds, read with the builtin type's own methods.  Anything else
(a function, a module, a library object, a JAX array, which cannot change in place) is
fingerprinted by identity, so rebinding it still shows.

No learner code runs while a fingerprint is taken: types are compared exactly (a subclass of
dict could override ``items``), attribute dicts are read through the C-level ``__dict__``
descriptor only, and nothing is compared with ``==`` but the plain tuples built here.  The walk
is bounded (``MAX_NODES`` per global, ``MAX_DEPTH`` deep): past the bound a value counts by identity
and length, so a huge global costs little and still shows a rebinding.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
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


class _Budget:
    __slots__ = ("left",)

    def __init__(self, n: int):
        self.left = n


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
    own = _own_dict(value, owner) if t is not types.ModuleType else None
    if own is None:
        inside = _builtin_contents(value, t) if t is not types.ModuleType else None
        if inside is None:
            return ("id", t.__name__, id(value))
        # a library's container (defaultdict, OrderedDict, Counter, deque, SimpleNamespace, a
        # NamedTuple): written in place as easily as a dict, so read by content too
        return ("contents", t.__name__, id(value), fingerprint(inside, owner, budget, depth + 1))
    attrs = [(k, v) for k, v in list(own.items()) if type(k) is str and not k.startswith("__")]
    inside = _builtin_contents(value, t)
    return ("attrs", id(value), tuple((k, fingerprint(v, owner, budget, depth + 1)) for k, v in attrs),
            None if inside is None else fingerprint(inside, owner, budget, depth + 1))


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


def snapshot(module) -> dict:
    """``{global name: fingerprint}`` of ``module``'s globals (dunder names left out), each within
    its own budget (so one global's growth changes no other's picture)."""
    namespace = vars(module)
    owner = namespace.get("__name__")
    return {name: fingerprint(value, owner, _Budget(MAX_NODES)) for name, value in list(namespace.items())
            if type(name) is str and not name.startswith("__")}


def changed(before: dict, after: dict) -> list[str]:
    """The global names whose fingerprint differs (bound, rebound, unbound or written in place)."""
    return sorted(name for name in set(before) | set(after) if before.get(name) != after.get(name))
