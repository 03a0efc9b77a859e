"""Pytrees as plain data, for exercise 13: how a tree the grader draws crosses into the sandbox,
and how whatever the learner's code returns comes back.

Plain data (``grader.plaindata``) carries lists, tuples, dicts and arrays, but not ``None`` as
a node one can tell from a leaf, nor a namedtuple.  So a tree travels as a *description*: a
node is a dict with a ``"kind"``:

* ``{"kind": "array", "value": f32[...]}`` -- a leaf (built as a JAX array);
* ``{"kind": "none"}``;
* ``{"kind": "list" | "tuple", "items": [node, ...]}``;
* ``{"kind": "dict", "items": [[key, node], ...]}`` -- keys are strings, kept in the order
  given (a dict built from it is in insertion order, not sorted);
* ``{"kind": "namedtuple", "name": "Layer", "items": [node, ...]}`` -- one of ``NAMEDTUPLES``,
  whose classes the probes make when they are imported (before any learner code);
* and, only in what comes back: ``{"kind": "int" | "float" | "bool" | "str", "value": v}``
  and ``{"kind": "other", "type": "module.Class"}``.

``build`` (sandbox) turns a description into the tree, ``describe`` (sandbox) turns any
returned value into a description; ``jax_leaves``, ``with_leaves``, ``map_leaves`` and
``difference`` (trusted side) read descriptions with no JAX at all: the order of the leaves
is JAX's (dict keys sorted, namedtuple fields in declaration order, ``None`` a node with no
leaves), which ``tests/test_ex13_pytrees.py`` checks against ``jax.tree.leaves`` itself.
NumPy and the standard library only.
"""

from __future__ import annotations

import collections
from typing import Any, Callable

import numpy as np

#: The namedtuples a drawn tree may hold.  ``Layer`` lists its fields out of alphabetical
#: order on purpose: its leaves come in field order (w, then b), a dict's in key order.
NAMEDTUPLES: dict[str, tuple[str, ...]] = {
    "Layer": ("w", "b"),
    "Point": ("x", "y"),
    "Span": ("stop", "start", "step"),
}
CLASSES = {name: collections.namedtuple(name, fields) for name, fields in NAMEDTUPLES.items()}
MAX_NODES = 2000
MAX_DEPTH = 24
KEYS = ("w", "b", "scale", "bias", "kernel", "alpha", "mu", "nu", "emb", "head", "gamma", "zeta")


# --- sandbox side ---------------------------------------------------------------------------------

def build(desc: dict, to_array: Callable[[np.ndarray], Any]) -> Any:
    """The tree a description stands for; leaves through ``to_array`` (e.g. ``jax.device_put``)."""
    kind = desc["kind"]
    if kind == "array":
        return to_array(np.asarray(desc["value"], np.float32))
    if kind == "none":
        return None
    if kind == "dict":
        return {str(k): build(v, to_array) for k, v in desc["items"]}
    items = [build(v, to_array) for v in desc["items"]]
    if kind == "list":
        return items
    if kind == "tuple":
        return tuple(items)
    if kind == "namedtuple":
        return CLASSES[desc["name"]](*items)
    raise ValueError(f"unknown node kind {kind!r}")


def describe(value: Any, to_numpy: Callable[[Any], np.ndarray] = np.asarray, *, _depth: int = 0,
             _count: list | None = None) -> dict:
    """Whatever the learner's code returned, as a description (exact types only: a subclass of
    ``dict`` or ``list`` other than a namedtuple is ``other``)."""
    count = _count if _count is not None else [0]
    count[0] += 1
    if _depth > MAX_DEPTH or count[0] > MAX_NODES:
        return {"kind": "other", "type": "<too large or too deep>"}
    t = type(value)
    if value is None:
        return {"kind": "none"}
    if t in (bool, int, float, str):
        if t is int and not -2**63 <= value < 2**63:
            return {"kind": "other", "type": "int (beyond 64 bits)"}
        if t is float and value != value:  # NaN travels as text
            return {"kind": "float", "value": "nan"}
        return {"kind": t.__name__, "value": value if t is not float or abs(value) != float("inf") else repr(value)}
    if t is dict:
        if not all(type(k) is str for k in value):
            return {"kind": "other", "type": "dict with keys that are not str"}
        return {"kind": "dict", "items": [[k, describe(v, to_numpy, _depth=_depth + 1, _count=count)]
                                          for k, v in value.items()]}
    if t is list or t is tuple:
        return {"kind": t.__name__, "items": [describe(v, to_numpy, _depth=_depth + 1, _count=count) for v in value]}
    if isinstance(value, tuple) and t.__name__ in CLASSES and getattr(t, "_fields", None) == NAMEDTUPLES[t.__name__]:
        return {"kind": "namedtuple", "name": t.__name__,
                "items": [describe(v, to_numpy, _depth=_depth + 1, _count=count) for v in tuple.__iter__(value)]}
    module = getattr(t, "__module__", "") or ""
    if isinstance(value, np.ndarray) or isinstance(value, np.generic) or module.split(".")[0] in ("jax", "jaxlib"):
        try:
            arr = to_numpy(value)
        except Exception:  # noqa: BLE001 - a tracer or a deleted array: not a value
            return {"kind": "other", "type": f"{module}.{t.__qualname__}"}
        if type(arr) is np.ndarray and str(arr.dtype) in ("float32", "float64", "int32", "int64", "bool"):
            return {"kind": "array", "value": arr}
    return {"kind": "other", "type": f"{module}.{t.__qualname__}"[:200]}


# --- trusted side -----------------------------------------------------------------------------------

def children(desc: dict) -> list[dict]:
    """The child nodes in JAX's flattening order: a dict's by sorted key, the rest as given."""
    kind = desc["kind"]
    if kind == "dict":
        return [v for _, v in sorted(desc["items"], key=lambda kv: kv[0])]
    if kind in ("list", "tuple", "namedtuple"):
        return list(desc["items"])
    return []


def jax_leaves(desc: dict) -> list[dict]:
    """The leaf nodes of a description, in the order ``jax.tree.leaves`` gives them."""
    if desc["kind"] == "array":
        return [desc]
    return [leaf for child in children(desc) for leaf in jax_leaves(child)]


def map_leaves(desc: dict, fn: Callable[[dict], dict]) -> dict:
    """The same structure, each leaf node replaced by ``fn(leaf)`` (dict items keep their order)."""
    kind = desc["kind"]
    if kind == "array":
        return fn(desc)
    if kind == "dict":
        return {"kind": "dict", "items": [[k, map_leaves(v, fn)] for k, v in desc["items"]]}
    if kind in ("list", "tuple", "namedtuple"):
        return {**desc, "items": [map_leaves(v, fn) for v in desc["items"]]}
    return desc


def with_leaves(desc: dict, values: list[np.ndarray]) -> dict:
    """The same structure, its leaves (in JAX's order) replaced by ``values``."""
    order = {id(leaf): i for i, leaf in enumerate(jax_leaves(desc))}
    return map_leaves(desc, lambda leaf: {"kind": "array", "value": values[order[id(leaf)]]})


def shape_node(shape: tuple[int, ...]) -> dict:
    """What ``leaf.shape`` describes as, marked so that ``difference`` can say "a shape"."""
    return {"kind": "tuple", "shape": True, "items": [{"kind": "int", "value": int(d)} for d in shape]}


def kinds(desc: dict) -> set[str]:
    """Every node kind a description holds (a dict whose keys are not in sorted order adds
    ``dict_unsorted``; a namedtuple ``Layer``, whose fields are not, ``namedtuple_unsorted``;
    a 0-d leaf ``scalar_leaf``)."""
    found = {desc["kind"]}
    if desc["kind"] == "dict":
        keys = [k for k, _ in desc["items"]]
        if keys != sorted(keys):
            found.add("dict_unsorted")
    if desc["kind"] == "namedtuple" and list(NAMEDTUPLES[desc["name"]]) != sorted(NAMEDTUPLES[desc["name"]]):
        found.add("namedtuple_unsorted")
    if desc["kind"] == "array" and np.asarray(desc["value"]).ndim == 0:
        found.add("scalar_leaf")
    for child in children(desc):
        found |= kinds(child)
    return found


def depth(desc: dict) -> int:
    """Containers on the longest path from the root to a leaf (a leaf alone: 0)."""
    if desc["kind"] == "array":
        return 0
    return 1 + max((depth(c) for c in children(desc)), default=0)


_WHAT = {"array": "an array", "none": "None", "list": "a list", "tuple": "a tuple", "dict": "a dict",
         "namedtuple": "a namedtuple", "int": "a Python int", "float": "a Python float", "bool": "a bool",
         "str": "a str", "other": "something else"}


def _what(node: dict) -> str:
    if node["kind"] == "namedtuple":
        return f"a namedtuple {node['name']}"
    if node["kind"] == "other":
        return f"a {node.get('type', 'value')}"
    return _WHAT.get(node["kind"], node["kind"])


def difference(got: dict, want: dict, *, rtol: float = 1e-5, atol: float = 1e-6, path: str = "tree"
               ) -> tuple[str, str, str] | None:
    """The first place where ``got`` differs from ``want``: ``(path, what is wrong, kind)``,
    or None when they agree.  ``kind`` names the sort of node that differs (``"namedtuple"``,
    ``"none"``, ``"dict"``, ``"leaf"``, ...), so feedback can say what went wrong without the path
    (which names drawn keys).  Dicts compare by key, whatever their order."""
    gk, wk = got.get("kind"), want["kind"]
    if want.get("shape"):
        dims = [i.get("value") if i.get("kind") == "int" else None for i in got.get("items", [])]
        if gk != "tuple" or dims != [i["value"] for i in want["items"]]:
            shown = (f"{_what(got)} of {[_what(i) if d is None else d for i, d in zip(got['items'], dims)]}"
                     if gk in ("tuple", "list") else _what(got))
            return path, f"expected the shape {tuple(i['value'] for i in want['items'])}, got {shown}", "shape"
        return None
    if wk == "array":
        if gk != "array":
            return path, f"expected an array leaf, got {_what(got)}", "leaf"
        g, w = np.asarray(got["value"]), np.asarray(want["value"])
        if g.shape != w.shape:
            return path, f"expected shape {w.shape}, got {g.shape}", "leaf_shape"
        if str(g.dtype) != str(w.dtype):
            return path, f"expected {w.dtype}, got {g.dtype}", "leaf_dtype"
        if not np.allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol):
            show = lambda a: np.array2string(a.ravel()[:6], precision=4) + (" ..." if a.size > 6 else "")  # noqa: E731
            return path, f"the leaf's values differ: got {show(g)}, expected {show(w)}", "leaf_values"
        return None
    if gk != wk or (wk == "namedtuple" and got.get("name") != want["name"]):
        return path, f"expected {_what(want)}, got {_what(got)}", wk
    if wk in ("int", "bool", "str", "float"):
        if got["value"] != want["value"] or type(got["value"]) is not type(want["value"]):
            return path, f"expected {want['value']!r}, got {got['value']!r}", "value"
        return None
    if wk == "dict":
        gkeys, wkeys = [k for k, _ in got["items"]], [k for k, _ in want["items"]]
        if sorted(gkeys) != sorted(wkeys):
            return path, f"expected keys {sorted(wkeys)}, got {sorted(gkeys)}", "dict"
        gmap = dict((k, v) for k, v in got["items"])
        for k, v in want["items"]:
            found = difference(gmap[k], v, rtol=rtol, atol=atol, path=f"{path}[{k!r}]")
            if found:
                return found
        return None
    if wk in ("list", "tuple", "namedtuple"):
        if len(got["items"]) != len(want["items"]):
            return path, f"expected {len(want['items'])} children, got {len(got['items'])}", wk
        for i, (g, w) in enumerate(zip(got["items"], want["items"])):
            name = f".{NAMEDTUPLES[want['name']][i]}" if wk == "namedtuple" else f"[{i}]"
            found = difference(g, w, rtol=rtol, atol=atol, path=path + name)
            if found:
                return found
        return None
    return None  # none: nothing more to compare


# --- drawing trees (trusted side) ---------------------------------------------------------------------

CONTAINERS = ("dict", "list", "tuple", "namedtuple", "none")


def _leaf(rng: np.random.Generator, scalar: bool = False) -> dict:
    ndim = 0 if scalar else int(rng.choice([1, 1, 2, 2, 0]))
    shape = tuple(int(rng.integers(1, 5)) for _ in range(ndim))
    return {"kind": "array", "value": rng.normal(size=shape).astype(np.float32)}


def _node(rng: np.random.Generator, kind: str, depth_left: int) -> dict:
    """A container of ``kind`` whose children are leaves or (while depth is left) containers."""
    if kind == "none":
        return {"kind": "none"}

    def child() -> dict:
        if depth_left > 0 and rng.random() < 0.35:
            return _node(rng, str(rng.choice(["dict", "list", "tuple"])), depth_left - 1)
        return {"kind": "none"} if rng.random() < 0.1 else _leaf(rng)

    if kind == "namedtuple":
        name = str(rng.choice(sorted(NAMEDTUPLES)))
        return {"kind": "namedtuple", "name": name, "items": [child() for _ in NAMEDTUPLES[name]]}
    n = int(rng.integers(1, 4))
    if kind == "dict":
        keys = [str(k) for k in rng.choice(KEYS, size=n, replace=False)]
        return {"kind": "dict", "items": [[k, child()] for k in keys]}
    return {"kind": kind, "items": [child() for _ in range(n)]}


def draw_tree(rng: np.random.Generator) -> dict:
    """A random nested tree holding, wherever the draw puts them: a dict whose keys are not in
    sorted order, a list, a tuple, the namedtuple ``Layer`` (fields out of sorted order) and
    another namedtuple, ``None``, a 0-d leaf, and a path three containers deep."""
    parts = [_node(rng, kind, 1) for kind in ("list", "tuple", "namedtuple", "none")]
    parts.append({"kind": "namedtuple", "name": "Layer", "items": [_leaf(rng), _leaf(rng)]})
    parts.append(_leaf(rng, scalar=True))
    # three deep, whatever else was drawn: a list holding a tuple holding a leaf
    parts.append({"kind": "list", "items": [{"kind": "tuple", "items": [_leaf(rng), {"kind": "none"}]}]})
    order = rng.permutation(len(parts))
    keys = [str(k) for k in rng.choice(KEYS, size=len(parts), replace=False)]
    if keys == sorted(keys):  # the root dict's keys out of sorted order
        keys[0], keys[-1] = keys[-1], keys[0]
    root = {"kind": "dict", "items": [[keys[i], parts[j]] for i, j in enumerate(order)]}
    if rng.random() < 0.5:  # sometimes the root is a tuple holding the dict and one more leaf
        root = {"kind": "tuple", "items": [root, _leaf(rng)]}
    return root


def tree_labels(desc: dict) -> set[str]:
    """The coverage categories a drawn tree holds (``COVERAGE`` of the hidden checks)."""
    found = kinds(desc)
    if depth(desc) >= 3:
        found.add("depth_3")
    return found


#: What every drawn tree holds (``draw_tree``'s promise, checked at grading time by ``ensure``).
TREE_CATEGORIES = frozenset({"dict", "dict_unsorted", "list", "tuple", "namedtuple", "namedtuple_unsorted", "none",
                             "scalar_leaf", "depth_3"})
