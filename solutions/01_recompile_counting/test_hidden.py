"""Hidden checks for exercise 1: call sequences and a workload drawn at grading time.

Part A: five checks, one per family of rules jit's cache key follows (shapes and dtypes,
weak types, static arguments, pytrees and call style, cache reuse).  Each check draws
call sequences, and each sequence is built around ONE kind of change (its category):
every call either repeats the call before it exactly (with fresh array contents) or
changes it in that one way, so a sequence that is mispredicted tells which kind of change
was mispredicted -- and that is what the learner reads, never the sequence.  The draw
checks its own work (``analyse`` classifies every change between consecutive calls) and
``COVERAGE`` declares, per check, the categories it must hold at every seed.  The true
compile count of every sequence is measured live on a fresh jit in the clean worker.
``predict_compiles`` must predict, not measure: the sandbox's meter says how many traces
and compilations each of its calls caused, and any at all fails the check.

Part B: a serving workload of every mode over two logits shapes, each (shape, mode) pair
requested in every form (shift a Python float or an array, mode positional or by keyword),
run once through ``ex01_recompile:serve_workload``; one check judges its outputs, the
other its compile count (the sandbox's meter), and the requests that compiled say why.
"""

import copy

import numpy as np
import pytest

from grader.coverage import Coverage, check_rng, ensure
from grader.exercises.ex01_recompile.judges import as_count, expect_score_in_jax, expected_score, mode_of, warm_up_score
from grader.feedback import CheckFailed
from grader.testing import expect_compiles, probe_compiles

# ---------------------------------------------------------------------------------------
# Part A.  A call is held as a state
#   {"x": V, "scale": V, "mode": str, "how": {"x": pos|kw, "scale": pos|kw, "mode": pos|kw|default},
#    "kw_order": [names passed by keyword, in order]}
# and turned into the learner's {"args": [...], "kwargs": {...}} by `to_call`.
# ---------------------------------------------------------------------------------------

DTYPES = ("float32", "int32", "float16")
MODES = ("sum", "mean", "max")
KEYS = ("a", "b", "c", "w", "k")
PARAMS = ("x", "scale", "mode")
WEAK_DTYPE = {float: "float32", int: "int32"}  # what a Python scalar becomes (x64 off)

#: what the learner reads about a sequence of each category (several categories may share words)
CATEGORIES = {
    "shape": "an array changes shape",
    "array_dtype_jax": "an array keeps its shape and changes dtype",
    "array_dtype_numpy": "an array keeps its shape and changes dtype",
    "scalar_type": "a Python int becomes a Python float, or back",
    "py_vs_jax0d": "a Python scalar is swapped for a 0-d jax array of the same dtype, or back",
    "py_vs_numpy0d": "a Python scalar is swapped for a 0-d NumPy array of the same dtype, or back",
    "jax0d_vs_numpy0d": "a 0-d jax array is swapped for a 0-d NumPy array of the same dtype, or back",
    "static_value": "the static argument `mode` takes another value",
    "static_how": "`mode` keeps its value and moves between positional and keyword",
    "static_default_kw": "`mode` is left at its default in some calls and passed as mode='sum' in others",
    "static_default_pos": "`mode` is left at its default in some calls and passed positionally as 'sum' in others",
    "pytree_kind": "the pytree structure of `x` changes its container (an array, a tuple or a dict)",
    "pytree_count": "the pytree structure of `x` gains or loses an entry (a tuple's length or a dict's number of keys)",
    "pytree_keys": "a dict in `x` keeps its size and changes its key names",
    "tuple_vs_dict": "a tuple in `x` becomes a dict, or a dict a tuple, holding the same leaves in the same order",
    "arg_how": "`x` or `scale` moves between positional and keyword",
    "dict_order": "only the order of a dict's entries changes",
    "kw_order": "only the order of the keyword arguments changes",
    "revisit": "calls go back to a signature seen earlier in the sequence",
    "float_values": "only the values of Python floats (and the contents of arrays) change",
    "int_values": "only the values of Python ints (and the contents of arrays) change",
    "numpy_vs_jax": "an array is swapped between NumPy and jax, keeping its dtype and shape",
}

#: Part A's checks: the categories of the sequences each one draws (one sequence per entry)
PLANS = {
    "predicts_shapes_and_dtypes": ("shape", "shape", "array_dtype_jax", "array_dtype_numpy", "scalar_type",
                                   "scalar_type"),
    "predicts_weak_types": ("py_vs_jax0d", "py_vs_jax0d", "py_vs_numpy0d", "py_vs_numpy0d", "jax0d_vs_numpy0d",
                            "jax0d_vs_numpy0d"),
    "predicts_static_arguments": ("static_value", "static_value", "static_how", "static_how", "static_default_kw",
                                  "static_default_pos"),
    "predicts_pytrees_and_call_style": ("pytree_kind", "tuple_vs_dict", "pytree_count", "pytree_keys", "arg_how",
                                        "arg_how", "dict_order", "kw_order"),
    "predicts_cache_reuse": ("revisit", "revisit", "float_values", "int_values", "numpy_vs_jax", "numpy_vs_jax"),
}
#: what each check's sequences may change besides their own category
KEY_NEUTRAL = {"float_values", "int_values", "dict_order", "kw_order", "jax0d_vs_numpy0d", "numpy_vs_jax"}

# --- random values -----------------------------------------------------------------------

def pick(rng, items):
    return items[int(rng.integers(len(items)))]


def r_shape(rng, old=None):
    while True:
        shape = [int(d) for d in rng.integers(1, 5, size=int(rng.integers(0, 3)))]
        if shape != old:
            return shape


def r_array(rng, dtype=None, shape=None, numpy=None):
    spec = {"array": dtype or pick(rng, DTYPES), "shape": r_shape(rng) if shape is None else shape}
    if numpy if numpy is not None else rng.random() < 0.3:
        spec["numpy"] = True
    return spec


def r_float(rng):
    return float(round(rng.uniform(-3, 3), 2))


def r_int(rng):
    return int(rng.integers(-5, 10))


def r_scalar0d(rng):
    """A Python scalar or a 0-d array (jax or NumPy) of a Python scalar's dtype."""
    u = rng.random()
    if u < 0.3:
        return r_float(rng)
    if u < 0.5:
        return r_int(rng)
    return r_array(rng, pick(rng, ("float32", "int32")), [], numpy=rng.random() < 0.4)


def r_leaf(rng):
    u = rng.random()
    return r_array(rng) if u < 0.5 else r_scalar0d(rng)


def r_x(rng, kind=None):
    kind = kind or pick(rng, ["array", "array", "tuple", "dict", "dict"])
    if kind == "array":
        return r_array(rng)
    n = int(rng.integers(1, 4)) if kind == "tuple" else int(rng.integers(2, 4))
    leaves = [r_array(rng)] + [r_leaf(rng) for _ in range(n - 1)]
    if kind == "tuple":
        return {"tuple": leaves}
    return {"dict": dict(zip([str(k) for k in rng.permutation(KEYS)[:n]], leaves))}


def r_call(rng, *, mode_how=None, xs_how=None, x_kind=None):
    mode_how = mode_how or pick(rng, ["default", "kw", "pos"])
    if xs_how is None:
        xs_how = ("pos", "pos") if mode_how == "pos" else pick(rng, [("pos", "pos"), ("pos", "kw"), ("kw", "kw")])
    how = {"x": xs_how[0], "scale": xs_how[1], "mode": mode_how}
    mode = "sum" if mode_how == "default" else pick(rng, MODES)
    kw = [p for p in PARAMS if how[p] == "kw"]
    kw = [kw[i] for i in rng.permutation(len(kw))]
    scale = r_scalar0d(rng) if rng.random() < 0.8 else r_array(rng, "float32", [int(rng.integers(1, 4))])
    return {"x": r_x(rng, x_kind), "scale": scale, "mode": mode, "how": how, "kw_order": kw}


def to_call(state):
    how = state["how"]
    flags = [how[p] == "pos" for p in PARAMS]
    assert flags == sorted(flags, reverse=True), how  # positional arguments form a prefix
    args = [state[p] for p in PARAMS if how[p] == "pos"]
    assert sorted(state["kw_order"]) == sorted(p for p in PARAMS if how[p] == "kw")
    return {"args": copy.deepcopy(args), "kwargs": {p: copy.deepcopy(state[p]) for p in state["kw_order"]}}


# --- leaves inside a value -----------------------------------------------------------------

def is_array(v):
    return isinstance(v, dict) and "array" in v


def is_node(v, kind):
    return isinstance(v, dict) and kind in v


def leaf_paths(spec, path=()):
    if is_node(spec, "tuple"):
        for i, s in enumerate(spec["tuple"]):
            yield from leaf_paths(s, path + (("tuple", i),))
    elif is_node(spec, "dict"):
        for k, s in spec["dict"].items():
            yield from leaf_paths(s, path + (("dict", k),))
    else:
        yield path, spec


def replaced(spec, path, new):
    if not path:
        return new
    (kind, key), rest = path[0], path[1:]
    out = copy.deepcopy(spec)
    out[kind][key] = replaced(spec[kind][key], rest, new)
    return out


def all_leaves(state):
    return [(p, path, leaf) for p in ("x", "scale") for path, leaf in leaf_paths(state[p])]


def with_leaf(state, param, path, new):
    out = copy.deepcopy(state)
    out[param] = replaced(state[param], path, new)
    return out


def mutate_leaf(rng, state, accepts, change):
    """Apply ``change(rng, leaf)`` to one random leaf that ``accepts``; None when none does."""
    options = [(p, path, v) for p, path, v in all_leaves(state) if accepts(v)]
    if not options:
        return None
    p, path, v = pick(rng, options)
    return with_leaf(state, p, path, change(rng, v))


# --- one change of each category -------------------------------------------------------------

def is_py(v):
    return type(v) in (float, int)


def is_weakable0d(v, numpy):
    return is_array(v) and v["shape"] == [] and v["array"] in ("float32", "int32") and bool(v.get("numpy")) == numpy


def to_0d(rng, v, numpy):
    return r_array(rng, WEAK_DTYPE[type(v)], [], numpy=numpy)


def to_py(rng, v):
    return r_float(rng) if v["array"] == "float32" else r_int(rng)


def c_shape(rng, s):
    return mutate_leaf(rng, s, is_array, lambda rng, v: {**v, "shape": r_shape(rng, v["shape"])})


def c_array_dtype(numpy):
    def change(rng, s):
        return mutate_leaf(rng, s, lambda v: is_array(v) and bool(v.get("numpy")) == numpy,
                           lambda rng, v: {**v, "array": pick(rng, [d for d in DTYPES if d != v["array"]])})
    return change


def c_scalar_type(rng, s):
    return mutate_leaf(rng, s, is_py, lambda rng, v: float(v) if type(v) is int else int(round(v)))


def c_weak(numpy):
    def change(rng, s):
        return mutate_leaf(rng, s, lambda v: is_py(v) or is_weakable0d(v, numpy),
                           lambda rng, v: to_0d(rng, v, numpy) if is_py(v) else to_py(rng, v))
    return change


def c_jax0d_vs_numpy0d(rng, s):
    def toggle(rng, v):
        out = {"array": v["array"], "shape": []}
        if not v.get("numpy"):
            out["numpy"] = True
        return out
    return mutate_leaf(rng, s, lambda v: is_array(v) and v["shape"] == [], toggle)


def c_numpy_vs_jax(rng, s):
    def toggle(rng, v):
        out = {"array": v["array"], "shape": v["shape"]}
        if not v.get("numpy"):
            out["numpy"] = True
        return out
    return mutate_leaf(rng, s, lambda v: is_array(v) and v["shape"] != [], toggle)


def c_values(kind):
    """A new value for one Python scalar leaf of type ``kind`` (int or float)."""
    def change(rng, s):
        def other(rng, v):
            if kind is int:
                return v + int(rng.integers(1, 4))
            return float(round(v + pick(rng, [-1.25, -0.5, 0.75, 1.5]), 2))
        return mutate_leaf(rng, s, lambda v: type(v) is kind, other)
    return change


def c_static_value(rng, s):
    if s["how"]["mode"] == "default":
        return None
    out = copy.deepcopy(s)
    out["mode"] = pick(rng, [m for m in MODES if m != s["mode"]])
    return out


def set_mode_how(rng, s, new_how):
    out = copy.deepcopy(s)
    out["how"]["mode"] = new_how
    out["kw_order"] = [k for k in out["kw_order"] if k != "mode"]
    if new_how == "kw":
        out["kw_order"].insert(int(rng.integers(len(out["kw_order"]) + 1)), "mode")
    return out


def c_static_how(rng, s):
    if s["how"]["mode"] == "default" or s["how"]["scale"] != "pos":
        return None
    return set_mode_how(rng, s, "pos" if s["how"]["mode"] == "kw" else "kw")


def c_static_default(explicit):
    def change(rng, s):
        if s["mode"] != "sum":
            return None
        if s["how"]["mode"] == "default":
            return set_mode_how(rng, s, explicit)
        return set_mode_how(rng, s, "default") if s["how"]["mode"] == explicit else None
    return change


#: the pytree changes of each kind: another container, one entry more or less, other key names
PYTREE_OPS = {"pytree_kind": {"to_dict", "unwrap", "to_tuple", "wrap", "wrap2", "dict1"},
              "pytree_count": {"append", "drop", "add_key", "drop_key"},
              "pytree_keys": {"rename"}}


def c_pytree(kind):
    def change(rng, s):
        return pytree_op(rng, s, PYTREE_OPS[kind])
    return change


def pytree_op(rng, s, allowed):
    x = s["x"]
    if is_node(x, "tuple"):
        items = x["tuple"]
        options = ["append", "to_dict"] + (["drop"] if len(items) > 1 else ["unwrap"])
    elif is_node(x, "dict"):
        options = ["to_tuple"] + (["drop_key"] if len(x["dict"]) > 1 else [])
        options += ["add_key", "rename"] if len(x["dict"]) < len(KEYS) else []
    else:
        options = ["wrap", "wrap2", "dict1"]
    options = [o for o in options if o in allowed]
    if not options:
        return None
    op = pick(rng, options)
    if op == "append":
        new = {"tuple": items + [r_leaf(rng)]}
    elif op == "drop":
        i = int(rng.integers(len(items)))
        new = {"tuple": items[:i] + items[i + 1:]}
    elif op == "unwrap":
        new = items[0]
    elif op == "to_dict":
        new = {"dict": dict(zip(KEYS, items))}
    elif op == "to_tuple":
        new = {"tuple": list(x["dict"].values())}
    elif op == "add_key":
        new = {"dict": {**x["dict"], pick(rng, [k for k in KEYS if k not in x["dict"]]): r_leaf(rng)}}
    elif op == "drop_key":
        gone = pick(rng, list(x["dict"]))
        new = {"dict": {k: v for k, v in x["dict"].items() if k != gone}}
    elif op == "rename":  # a fresh name that sorts where the old one did: only the name changes
        old = pick(rng, list(x["dict"]))
        fresh = old + "2"
        while fresh in x["dict"]:
            fresh += "2"
        new = {"dict": {(fresh if k == old else k): v for k, v in x["dict"].items()}}
    elif op == "wrap":
        new = {"tuple": [x]}
    elif op == "wrap2":
        new = {"tuple": [x, r_leaf(rng)]}
    else:
        new = {"dict": {pick(rng, KEYS): x}}
    out = copy.deepcopy(s)
    out["x"] = copy.deepcopy(new)
    return out


def c_arg_how(rng, s):
    how = s["how"]
    if how["mode"] == "pos":
        return None
    nxt = {("pos", "pos"): [("pos", "kw")], ("pos", "kw"): [("pos", "pos"), ("kw", "kw")],
           ("kw", "kw"): [("pos", "kw")]}[(how["x"], how["scale"])]
    out = copy.deepcopy(s)
    out["how"]["x"], out["how"]["scale"] = pick(rng, nxt)
    kw = [k for k in s["kw_order"] if out["how"][k] == "kw"]
    for p in ("x", "scale"):
        if out["how"][p] == "kw" and p not in kw:
            kw.insert(int(rng.integers(len(kw) + 1)), p)
    out["kw_order"] = kw
    return out


def c_dict_order(rng, s):
    if not (is_node(s["x"], "dict") and len(s["x"]["dict"]) > 1):
        return None
    out = copy.deepcopy(s)
    items = list(s["x"]["dict"].items())
    out["x"] = {"dict": dict(items[1:] + items[:1])}
    return out


def flat_order(v):
    """A tuple's items, or a dict's values in the order of its sorted keys (how JAX flattens it)."""
    return v["tuple"] if is_node(v, "tuple") else [v["dict"][k] for k in sorted(v["dict"])]


def c_tuple_vs_dict(rng, s):
    """The container of ``x`` swapped between tuple and dict, its leaves kept in flattening order."""
    x = s["x"]
    if is_node(x, "tuple") and 0 < len(x["tuple"]) <= 3:
        new = {"dict": dict(zip(sorted(KEYS), x["tuple"]))}
    elif is_node(x, "dict"):
        new = {"tuple": flat_order(x)}
    else:
        return None
    out = copy.deepcopy(s)
    out["x"] = copy.deepcopy(new)
    return out


def c_kw_order(rng, s):
    if len(s["kw_order"]) < 2:
        return None
    out = copy.deepcopy(s)
    out["kw_order"] = s["kw_order"][::-1]  # reversed: every pair of keywords swaps, traced ones included
    return out


CHANGES = {
    "shape": c_shape, "array_dtype_jax": c_array_dtype(False), "array_dtype_numpy": c_array_dtype(True),
    "scalar_type": c_scalar_type, "py_vs_jax0d": c_weak(False), "py_vs_numpy0d": c_weak(True),
    "jax0d_vs_numpy0d": c_jax0d_vs_numpy0d, "static_value": c_static_value, "static_how": c_static_how,
    "static_default_kw": c_static_default("kw"), "static_default_pos": c_static_default("pos"),
    "pytree_kind": c_pytree("pytree_kind"), "pytree_count": c_pytree("pytree_count"),
    "pytree_keys": c_pytree("pytree_keys"), "arg_how": c_arg_how, "dict_order": c_dict_order,
    "kw_order": c_kw_order, "tuple_vs_dict": c_tuple_vs_dict, "float_values": c_values(float), "int_values": c_values(int),
    "numpy_vs_jax": c_numpy_vs_jax, "revisit": c_shape,
}
#: how the first call of a sequence of each category is drawn
BASE = {
    "static_value": {"mode_how": "kw"}, "static_how": {"xs_how": ("pos", "pos")},
    "static_default_kw": {"mode_how": "default"}, "static_default_pos": {"mode_how": "default",
                                                                         "xs_how": ("pos", "pos")},
    "arg_how": {"mode_how": "kw"}, "dict_order": {"x_kind": "dict"},
    "kw_order": {"mode_how": "kw", "xs_how": ("kw", "kw")}, "pytree_keys": {"x_kind": "dict"},
    "tuple_vs_dict": {"x_kind": "tuple"},
}


# --- what a call's cache key is, and what changed between two calls ---------------------------

def leaf_key(v):
    if isinstance(v, str):
        return ("static", v)
    if is_py(v):
        return ("leaf", WEAK_DTYPE[type(v)], (), True)
    if is_array(v):
        return ("leaf", v["array"], tuple(v["shape"]), False)
    if is_node(v, "tuple"):
        return ("tuple", tuple(leaf_key(e) for e in v["tuple"]))
    return ("dict", tuple(sorted((k, leaf_key(e)) for k, e in v["dict"].items())))


def call_key(call):
    """What jit keys a call on: the (args, kwargs) pytree, kwargs by name (the grader's own rule,
    used only to shape the draw; the truth is always measured)."""
    return (tuple(leaf_key(a) for a in call["args"]),
            tuple(sorted((k, leaf_key(v)) for k, v in call["kwargs"].items())))


def bound(call):
    """{param: (value, how)} of a call, and the order its keywords came in."""
    out = {p: (v, "pos") for p, v in zip(PARAMS, call["args"])}
    out.update({p: (v, "kw") for p, v in call["kwargs"].items()})
    out.setdefault("mode", ("sum", "default"))
    return out, list(call["kwargs"])


def structure(v):
    if is_node(v, "tuple"):
        return ("tuple", tuple(structure(e) for e in v["tuple"]))
    if is_node(v, "dict"):
        return ("dict", tuple(sorted((k, structure(e)) for k, e in v["dict"].items())))
    return "*"


def leaf_change(a, b):
    """The category of the change from leaf ``a`` to leaf ``b`` (None: identical spec)."""
    if type(a) is type(b) and a == b:  # 2 == 2.0 in Python, but an int is not a float to jit
        return None
    if is_array(a) and is_array(b):
        if a["shape"] != b["shape"]:
            return "shape"
        if a["array"] != b["array"]:
            return "array_dtype_numpy" if a.get("numpy") and b.get("numpy") else \
                "array_dtype_jax" if not a.get("numpy") and not b.get("numpy") else "mixed"
        return "jax0d_vs_numpy0d" if a["shape"] == [] else "numpy_vs_jax"
    if is_py(a) and is_py(b):
        return ("float_values" if type(a) is float else "int_values") if type(a) is type(b) else "scalar_type"
    py, arr = (a, b) if is_py(a) else (b, a)
    if is_py(py) and is_array(arr) and arr["shape"] == [] and arr["array"] == WEAK_DTYPE[type(py)]:
        return "py_vs_numpy0d" if arr.get("numpy") else "py_vs_jax0d"
    return "mixed"


def pytree_change(a, b):
    """Which kind of pytree change turns ``a`` into ``b`` (their first difference, outside in):
    "pytree_kind" (another container, or a leaf for a container), "pytree_count" (a tuple's length
    or a dict's number of keys), "pytree_keys" (a dict of one size with other key names); None
    when their structures agree."""
    kinds = [("tuple" if is_node(v, "tuple") else "dict" if is_node(v, "dict") else "leaf") for v in (a, b)]
    if kinds[0] != kinds[1]:
        return "pytree_kind"
    if kinds[0] == "tuple":
        if len(a["tuple"]) != len(b["tuple"]):
            return "pytree_count"
        pairs = zip(a["tuple"], b["tuple"])
    elif kinds[0] == "dict":
        if len(a["dict"]) != len(b["dict"]):
            return "pytree_count"
        if set(a["dict"]) != set(b["dict"]):
            return "pytree_keys"
        pairs = ((a["dict"][k], b["dict"][k]) for k in sorted(a["dict"]))
    else:
        return None
    for ea, eb in pairs:
        found = pytree_change(ea, eb)
        if found:
            return found
    return None


def value_orders(v):
    if is_node(v, "tuple"):
        return [o for e in v["tuple"] for o in value_orders(e)]
    if is_node(v, "dict"):
        return [tuple(v["dict"])] + [o for e in v["dict"].values() for o in value_orders(e)]
    return []


def changes(prev, call):
    """Every kind of change from call ``prev`` to ``call``."""
    (pa, pkw), (ca, ckw) = bound(prev), bound(call)
    out = set()
    for p in ("x", "scale"):
        if pa[p][1] != ca[p][1]:
            out.add("arg_how")
    (pm, pmh), (cm, cmh) = pa["mode"], ca["mode"]
    if pm != cm:
        out.add("static_value")
    elif pmh != cmh:
        out.add("static_how" if "default" not in (pmh, cmh) else
                "static_default_kw" if "kw" in (pmh, cmh) else "static_default_pos")
    for p in ("x", "scale"):
        a, b = pa[p][0], ca[p][0]
        if structure(a) != structure(b):
            out.add(pytree_change(a, b))
            kinds = {"tuple" if is_node(v, "tuple") else "dict" if is_node(v, "dict") else "leaf" for v in (a, b)}
            if kinds == {"tuple", "dict"} and flat_order(a) == flat_order(b):
                out.add("tuple_vs_dict")
            continue
        leaves_a = sorted(leaf_paths(a), key=lambda t: repr(t[0]))
        leaves_b = sorted(leaf_paths(b), key=lambda t: repr(t[0]))
        for (_, la), (_, lb) in zip(leaves_a, leaves_b):
            kind = leaf_change(la, lb)
            if kind:
                out.add(kind)
        if value_orders(a) != value_orders(b):
            out.add("dict_order")
    if pkw != ckw and sorted(pkw) == sorted(ckw):
        out.add("kw_order")
    return out


def analyse(calls):
    """The kinds of change a sequence holds: each call against the one before it, plus
    "revisit" for a call that goes back to a signature seen before the previous call."""
    found, keys = set(), []
    for i, call in enumerate(calls):
        key = call_key(call)
        if i:
            found |= changes(calls[i - 1], call)
            if key != keys[-1] and key in keys:
                found.add("revisit")
        keys.append(key)
    return found


# --- drawing a sequence of one category -------------------------------------------------------

def allowed_kinds(category) -> set:
    """The kinds of change a sequence about ``category`` may hold: its own, and what comes with it
    (a revisit may change shapes; a tuple<->dict swap is a change of container too)."""
    if category == "revisit":
        return {"revisit", "shape"}
    if category in ("pytree_kind", "tuple_vs_dict"):
        return {"pytree_kind", "tuple_vs_dict"}
    return {category}


def draw_sequence(rng, category):
    """A sequence of 3-5 calls about ``category``: its first change is one of that category; every
    later call repeats the call before it or changes it the same way again.  Apart from
    "revisit" sequences, a change never goes back to a signature seen before."""
    change = CHANGES[category]
    length = int(rng.integers(3, 6))
    for _ in range(200):
        base = r_call(rng, **BASE.get(category, {}))
        first = change(rng, base)
        if first is None:
            continue
        if category not in KEY_NEUTRAL and call_key(to_call(first)) == call_key(to_call(base)):
            continue
        states = [base, first]
        if category == "revisit":
            states.append(copy.deepcopy(base))
        while len(states) < length:
            last = states[-1]
            nxt = change(rng, last) if rng.random() < 0.7 else None
            keys = [call_key(to_call(s)) for s in states]
            if category == "revisit":
                nxt = copy.deepcopy(pick(rng, states[:-1])) if rng.random() < 0.5 else change(rng, pick(rng, states))
            elif nxt is not None and category not in KEY_NEUTRAL and call_key(to_call(nxt)) in keys:
                nxt = None  # it would go back to an earlier signature: that is another category
            states.append(nxt if nxt is not None else copy.deepcopy(last))
        calls = [to_call(s) for s in states]
        kinds = analyse(calls)
        if category in kinds and kinds <= allowed_kinds(category):
            return calls
    raise RuntimeError(f"could not draw a sequence about {category}")  # a grader bug, never the learner's


def draw_check_sequences(rng, check):
    return [(category, draw_sequence(rng, category)) for category in PLANS[check]]


def labels_of(sequences):
    """The categories a check's sequences really hold (each one analysed, not taken on trust)."""
    found = set()
    for category, calls in sequences:
        kinds = analyse(calls)
        if category in kinds:
            found.add(category)
    return found


def _coverage(check):
    return Coverage(required=set(PLANS[check]), labels=lambda rng: labels_of(draw_check_sequences(rng, check)),
                    test=f"test_{check}")


# ---------------------------------------------------------------------------------------
# Part B: one workload: two logits shapes x every mode, each pair with shift as a float and
# as an array and mode positional and by keyword
# ---------------------------------------------------------------------------------------

SERVE_MODES = ("probs", "logz", "entropy")
WORKLOAD_TEST = "test_workload_outputs_correct"  # the workload is drawn from this test's generator
FORMS = [(False, False), (False, True), (True, False), (True, True)]  # (shift is an array?, mode by keyword?)


def draw_workload(rng):
    """(requests, budget, plan): every mode over two logits shapes; each (shape, mode) pair
    is requested in all four forms (shift a Python float or a 0-d array, mode positional or by
    keyword) plus once more in one of them, with a new temperature and shift every time."""
    shapes = []
    while len(shapes) < 2:  # batch sizes 4..7: the public check uses 2 and 3
        shape = (int(rng.integers(4, 8)), int(rng.integers(3, 9)))
        if shape not in shapes:
            shapes.append(shape)
    pairs = [(shape, mode) for shape in shapes for mode in SERVE_MODES]
    plan = []
    for shape, mode in pairs:
        for shift_is_array, mode_kw in FORMS + [pick(rng, FORMS)]:
            plan.append((shape, mode, shift_is_array, mode_kw))
    plan = [plan[i] for i in rng.permutation(len(plan))]
    requests = []
    for shape, mode, shift_is_array, mode_kw in plan:
        logits = (rng.normal(size=shape) * 2).astype(np.float32)
        temperature = float(rng.uniform(0.5, 2.0))
        shift = float(rng.choice([-1, 1]) * rng.uniform(0.3, 1.5))  # never near 0: a shift must show in logz
        args = [logits, temperature, np.asarray(shift, np.float32) if shift_is_array else shift]
        kwargs = {"mode": mode} if mode_kw else {}
        if not mode_kw:
            args.append(mode)
        requests.append({"args": args, "kwargs": kwargs})
    return requests, len(pairs), plan


def workload_labels(rng):
    requests, _, plan = draw_workload(rng)
    out = {f"shapes:{len({s for s, _, _, _ in plan})}"}
    for (shape, mode, shift_is_array, mode_kw), req in zip(plan, requests):
        shift = req["args"][2]
        assert (type(shift) is np.ndarray) == shift_is_array and ("mode" in req["kwargs"]) == mode_kw
        out.add(f"mode:{mode_of(req['args'], req['kwargs'])}")
        out.add("shift:array" if type(shift) is np.ndarray else "shift:float")
        out.add("mode:keyword" if mode_kw else "mode:positional")
    pairs = {}
    for shape, mode, shift_is_array, mode_kw in plan:
        pairs.setdefault((shape, mode), []).append((shift_is_array, mode_kw))
    if all(set(forms) == set(FORMS) and len(forms) > len(FORMS) for forms in pairs.values()):
        out.add("every pair in every form, one form twice")
    return out


WORKLOAD_REQUIRED = {"mode:probs", "mode:logz", "mode:entropy", "shapes:2", "shift:array", "shift:float",
                     "mode:keyword", "mode:positional", "every pair in every form, one form twice"}

COVERAGE = {check: _coverage(check) for check in PLANS}
COVERAGE["workload_outputs_correct"] = Coverage(required=WORKLOAD_REQUIRED, labels=workload_labels,
                                                test=WORKLOAD_TEST)


# ---------------------------------------------------------------------------------------
# Part A: the checks
# ---------------------------------------------------------------------------------------

def judge_predictions(submission, truth, rng, check):
    sequences = draw_check_sequences(rng, check)
    ensure(check, PLANS[check], labels_of(sequences))
    counts = truth.probe("ex01_recompile:count_sequences", [calls for _, calls in sequences],
                         int(rng.integers(2**31)))["counts"]
    predictions, traces, compiles = [], 0, 0
    for _, calls in sequences:
        predictions.append(as_count(submission.call("predict_compiles", calls), "predict_compiles"))
        traces += submission.last_meter.get("traces", 0)
        compiles += submission.last_meter.get("compiles", 0)
    if traces or compiles:
        raise CheckFailed(
            "predict_compiles ran JAX while it predicted",
            measured=f"{traces} trace(s) and {compiles} compilation(s) during its calls",
            expected="none: a prediction from the rules, in plain Python",
            hint="work from the call descriptions alone: no jax.jit, make_jaxpr, eval_shape or jnp arrays",
            diagnosis="predict_compiles traced or compiled JAX code while it ran: this exercise asks you to "
                      "predict the count from jit's rules, not to measure it by running jit",
            advice="turn each call description into a hashable key in plain Python and count the distinct keys; "
                   "do not call jax.jit, jax.make_jaxpr, jax.eval_shape or create jnp arrays inside predict_compiles",
        )
    misses = [(category, got > true) for (category, _), got, true in zip(sequences, predictions, counts)
              if got != true]
    if not misses:
        return
    lines = []
    for about in dict.fromkeys(CATEGORIES[c] for c, _ in misses):
        sides = {high for c, high in misses if CATEGORIES[c] == about}
        side = "too many" if sides == {True} else "too few" if sides == {False} else "sometimes too many, sometimes too few"
        lines.append(f"{about} (you predicted {side} compilations)")
    summary = f"predict_compiles is wrong on {len(misses)} of {len(sequences)} sequences of this check; in those, "
    text = summary + "; ".join(lines)
    raise CheckFailed(
        text, measured="\n".join(f"{c}: predicted {g}, measured {t}" for (c, _), g, t in
                                 zip(sequences, predictions, counts)),
        expected="the number of compilations live JAX makes for every sequence",
        hint="build such sequences yourself and run them on a fresh jax.jit with JAX_LOG_COMPILES=1",
        diagnosis=text,
        advice="build a few sequences of that kind yourself, run them on a fresh jax.jit with JAX_LOG_COMPILES=1 "
               "and JAX_EXPLAIN_CACHE_MISSES=1, and fix that rule of your cache key",
    )


def test_predicts_shapes_and_dtypes(submission, truth, rng):
    judge_predictions(submission, truth, rng, "predicts_shapes_and_dtypes")


def test_predicts_weak_types(submission, truth, rng):
    judge_predictions(submission, truth, rng, "predicts_weak_types")


def test_predicts_static_arguments(submission, truth, rng):
    judge_predictions(submission, truth, rng, "predicts_static_arguments")


def test_predicts_pytrees_and_call_style(submission, truth, rng):
    judge_predictions(submission, truth, rng, "predicts_pytrees_and_call_style")


def test_predicts_cache_reuse(submission, truth, rng):
    judge_predictions(submission, truth, rng, "predicts_cache_reuse")


# ---------------------------------------------------------------------------------------
# Part B: the checks
# ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def workload(submission, reference, seed):
    requests, budget, plan = draw_workload(check_rng(seed, WORKLOAD_TEST))
    ensure("workload_outputs_correct", WORKLOAD_REQUIRED, workload_labels(check_rng(seed, WORKLOAD_TEST)))
    warm_up_score(submission, reference)
    out, compiles = probe_compiles(submission, reference, "ex01_recompile:serve_workload", requests)
    return requests, budget, plan, out["outputs"], compiles, out["per_request"]


def output_problem(out, expected):
    """What is wrong with one output ("" when it is right), in words that name no shape."""
    if not isinstance(out, np.ndarray):
        return "not an array"
    if out.shape != expected.shape:
        return "the wrong shape"
    if str(out.dtype) != "float32":
        return "the wrong dtype (float32 expected)"
    if not np.all(np.isfinite(out)):
        return "NaN or inf values"
    if not np.allclose(out, expected, rtol=1e-4, atol=1e-5):
        return "wrong values"
    return ""


def test_workload_outputs_correct(workload):
    requests, _, plan, outputs, _, _ = workload
    wrong = []  # (mode, shift as array?, mode by keyword?, problem)
    for req, (_, mode, shift_is_array, mode_kw), out in zip(requests, plan, outputs):
        problem = output_problem(out, expected_score(req))
        if problem:
            wrong.append((mode, shift_is_array, mode_kw, problem))
    if not wrong:
        return
    modes = sorted({m for m, _, _, _ in wrong}, key=SERVE_MODES.index)
    right = [m for m in SERVE_MODES if m not in modes]
    problems = sorted({p for _, _, _, p in wrong})
    text = (f"score returns {' and '.join(problems)} in mode{'s' if len(modes) > 1 else ''} "
            f"{', '.join(repr(m) for m in modes)}" + (f"; mode {' and '.join(repr(m) for m in right)} "
                                                      f"{'is' if len(right) == 1 else 'are'} right" if right else ""))
    shift_kinds = {a for _, a, _, _ in wrong}
    mode_kinds = {k for _, _, k, _ in wrong}
    all_of_mode = sum(1 for _, m, _, _ in plan if m in modes)
    if len(wrong) < all_of_mode and len(shift_kinds) == 1:
        text += (f"; only when shift arrives as {'a 0-d array' if shift_kinds == {True} else 'a Python float'}")
    elif len(wrong) < all_of_mode and len(mode_kinds) == 1:
        text += f"; only when mode is passed {'by keyword' if mode_kinds == {True} else 'positionally'}"
    if modes == ["logz"] and problems == ["wrong values"]:
        advice = ("probs and entropy do not change when every logit moves by the same amount, so they cannot show a "
                  "wrong shift; logz does: z = (logits + shift) / temperature, then logsumexp(z, axis=-1)")
    elif "the wrong shape" in problems:
        advice = "probs is [B, V]; logz and entropy reduce the last axis and are [B]"
    else:
        advice = ("compare with the definitions in the statement: z = (logits + shift) / temperature, "
                  "p = softmax(z, axis=-1); logz = logsumexp(z, axis=-1); entropy = -sum(p * log p, axis=-1)")
    raise CheckFailed(text, measured="\n".join(f"mode {m}, shift {'array' if a else 'float'}, "
                                               f"mode {'keyword' if k else 'positional'}: {p}" for m, a, k, p in wrong),
                      expected="every output within rtol=1e-4, atol=1e-5 of the float64 reference",
                      hint=advice, diagnosis=text, advice=advice)


def recompile_causes(plan, per_request):
    """Why requests compiled beyond the first of their (shape, mode) pair, as far as the requests
    the learner's own recorder saw compile can tell: {"value"} when a request compiled again in a
    form its pair had already used, {"shift"} / {"mode"} when it differed from an earlier request
    of its pair only in the type of shift / the way mode was passed, both when each of those
    earlier requests was there (neither difference alone would have compiled)."""
    causes, seen = set(), {}
    for (shape, mode, shift_is_array, mode_kw), n in zip(plan, per_request):
        earlier = seen.setdefault((shape, mode), [])
        if type(n) is int and n > 0 and earlier:
            other_shift, other_mode = (not shift_is_array, mode_kw) in earlier, (shift_is_array, not mode_kw) in earlier
            if (shift_is_array, mode_kw) in earlier:
                causes.add("value")
            elif other_shift and other_mode:  # neither difference alone explains it: both are in the key
                causes |= {"shift", "mode"}
            elif other_shift:
                causes.add("shift")
            elif other_mode:
                causes.add("mode")
        earlier.append((shift_is_array, mode_kw))
    return {"value"} if "value" in causes else causes  # a value in the key: the forms tell nothing more


CAUSES = {
    "value": ("requests of one (logits shape, mode) pair compiled again with the same shapes, the same type of shift "
              "and mode passed the same way: a value that changes from request to request is part of the cache key",
              "keep `temperature` (and shift) traced, not static, and jit your function once, outside `score`"),
    "shift": ("requests that differ only in whether shift is a Python float or a 0-d array compiled separately",
              "hand your jitted function shift as a float32 array every time: jnp.asarray(shift, jnp.float32) "
              "(without the dtype a Python float stays weakly typed)"),
    "mode": ("requests that differ only in whether mode is passed positionally or by keyword compiled separately",
             "call your jitted function with mode passed the same way every time (e.g. always mode=mode): "
             "positional and keyword arguments are different parts of the cache key"),
}


def test_workload_within_compile_budget(workload, submission):
    _, budget, plan, _, compiles, per_request = workload
    causes = [c for c in CAUSES if c in recompile_causes(plan, per_request)]
    advice = "; ".join(CAUSES[c][1] for c in causes) or (
        "keep `mode` static and everything else traced, give shift one dtype and weak type, and pass mode to your "
        "jitted function the same way every time")
    try:
        expect_compiles(compiles, at_least=1, at_most=budget, what="score", hint=advice,
                        advice=advice if compiles.counted > budget else "", fewer_ok=True)
    except CheckFailed as exc:
        if compiles.counted > budget:  # too many: say what the requests that compiled have in common
            unknown = "the requests that compiled again could not be told apart" + (
                "; several compilations per pair is what operations compiled one by one look like, outside a "
                "jitted function (is the work of score inside one?)" if compiles.counted > 2 * budget else "")
            exc.diagnosis = (f"{compiles.counted} compilations over the workload, more than one per (logits shape, "
                             f"mode) pair: " + ("; ".join(CAUSES[c][0] for c in causes) or unknown))
        raise
    expect_score_in_jax(submission, compiles)  # the count floor: the compilations are of JAX doing the work
