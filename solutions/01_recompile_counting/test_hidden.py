"""Hidden checks for exercise 1: call sequences and a workload drawn at grading time.

Part A: random call sequences, each built around one kind of change (see CATEGORIES);
the true compile count of each is measured live on a fresh jit of a target function
in this trusted process and compared with the learner's prediction.
Part B: a mixed serving workload (shapes, modes, temperatures, shift as float or array,
mode positional or keyword) run once through `generic:count_compiles`; one check
judges its outputs, the other its compile count.
"""

import copy
import zlib

import numpy as np
import pytest

from grader.checks.ex01_recompile import as_count, expected_score, mode_of
from grader.feedback import CheckFailed, expect_array, expect_close
from grader.testing import count_compiles, expect_compiles

# ---------------------------------------------------------------------------------------
# Drawing call sequences.  A call is held as a state
#   {"x": V, "scale": V, "mode": str, "how": {"x": pos|kw, "scale": pos|kw, "mode": pos|kw|default},
#    "kw_order": [names passed by keyword, in order]}
# and turned into the learner's {"args": [...], "kwargs": {...}} by `to_call`.
# ---------------------------------------------------------------------------------------

DTYPES = ("float32", "int32", "float16")
MODES = ("sum", "mean", "max")
KEYS = ("a", "b", "c", "w", "k")
PARAMS = ("x", "scale", "mode")

CATEGORIES = {
    "shape": "an array changes shape",
    "dtype": "an array changes dtype, or a Python int becomes a Python float (or back)",
    "weak": "a Python scalar is swapped for a 0-d array of the same dtype, or back (weak types)",
    "static_value": "the static argument `mode` takes another value",
    "static_how": "`mode` keeps its value but is passed another way (keyword, positional, or left at its default)",
    "static_default": "`mode` keeps its value but is passed another way (keyword, positional, or left at its default)",
    "pytree": "the pytree structure of `x` changes (tuple length, dict keys, tuple vs dict, wrapping in a tuple)",
    "arg_how": "`x` or `scale` moves between positional and keyword",
    "no_change": "only things outside the cache key change (values, numpy vs jax arrays, dict or keyword order)",
    "revisit": "calls go back to a signature seen earlier in the sequence",
    "mixed": "several kinds of change in one sequence",
}
PLAN = ("shape", "dtype", "weak", "static_value", "static_how", "static_default", "pytree", "arg_how", "no_change",
        "revisit", "mixed")


def r_shape(rng, old=None):
    while True:
        shape = [int(d) for d in rng.integers(1, 5, size=int(rng.integers(0, 3)))]
        if shape != old:
            return shape


def r_array(rng, dtype=None, shape=None):
    spec = {"array": dtype or str(rng.choice(DTYPES)), "shape": r_shape(rng) if shape is None else shape}
    if rng.random() < 0.3:
        spec["numpy"] = True
    return spec


def r_float(rng):
    return float(round(rng.uniform(-3, 3), 2))


def r_int(rng):
    return int(rng.integers(-5, 10))


def r_leaf(rng):
    u = rng.random()
    return r_array(rng) if u < 0.6 else (r_float(rng) if u < 0.85 else r_int(rng))


def r_x(rng, kind=None):
    kind = kind or str(rng.choice(["array", "tuple", "dict"], p=[0.4, 0.3, 0.3]))
    if kind == "array":
        return r_array(rng)
    n = int(rng.integers(1, 4)) if kind == "tuple" else int(rng.integers(2, 4))
    leaves = [r_array(rng)] + [r_leaf(rng) for _ in range(n - 1)]
    if kind == "tuple":
        return {"tuple": leaves}
    keys = [str(k) for k in rng.permutation(KEYS)[:n]]
    return {"dict": dict(zip(keys, leaves))}


def r_scale(rng, scalar=False):
    """scalar=True: a Python scalar or 0-d array; "python": a Python scalar."""
    u = rng.random() * {False: 1.0, True: 0.85, "python": 0.5}[scalar]
    if u < 0.35:
        return r_float(rng)
    if u < 0.5:
        return r_int(rng)
    if u < 0.75:
        return r_array(rng, "float32", [])
    if u < 0.85:
        return r_array(rng, "int32", [])
    return r_array(rng, "float32", [int(rng.integers(1, 4))])


def r_call(rng, *, mode_how=None, xs_how=None, x_kind=None, scalar_scale=False):
    mode_how = mode_how or str(rng.choice(["default", "kw", "pos"]))
    if xs_how is None:
        xs_how = ("pos", "pos") if mode_how == "pos" else [("pos", "pos"), ("pos", "kw"), ("kw", "kw")][int(rng.integers(3))]
    how = {"x": xs_how[0], "scale": xs_how[1], "mode": mode_how}
    mode = "sum" if mode_how == "default" else str(rng.choice(MODES))
    kw = [p for p in PARAMS if how[p] == "kw"]
    kw = [kw[i] for i in rng.permutation(len(kw))]
    return {"x": r_x(rng, x_kind), "scale": r_scale(rng, scalar_scale), "mode": mode, "how": how, "kw_order": kw}


def to_call(state):
    how = state["how"]
    flags = [how[p] == "pos" for p in PARAMS]
    assert flags == sorted(flags, reverse=True), how  # positional arguments form a prefix
    args = [state[p] for p in PARAMS if how[p] == "pos"]
    assert sorted(state["kw_order"]) == sorted(p for p in PARAMS if how[p] == "kw")
    return {"args": copy.deepcopy(args), "kwargs": {p: copy.deepcopy(state[p]) for p in state["kw_order"]}}


# --- leaves and paths inside a value -------------------------------------------------

def leaf_paths(spec, path=()):
    if isinstance(spec, dict) and "tuple" in spec:
        for i, s in enumerate(spec["tuple"]):
            yield from leaf_paths(s, path + (("tuple", i),))
    elif isinstance(spec, dict) and "dict" in spec:
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


def is_array(v):
    return isinstance(v, dict) and "array" in v


def is_node(v, kind):
    return isinstance(v, dict) and kind in v


def pick(rng, items):
    return items[int(rng.integers(len(items)))]


# --- mutations: each returns a new state, or None when it does not apply ------------

def m_shape(rng, s):
    arrays = [(p, path, v) for p, path, v in all_leaves(s) if is_array(v)]
    if not arrays:
        return None
    p, path, v = pick(rng, arrays)
    return with_leaf(s, p, path, {**v, "shape": r_shape(rng, v["shape"])})


def m_dtype(rng, s, scalar=False):
    leaves = all_leaves(s)
    scalars = [leaf for leaf in leaves if not is_array(leaf[2])]
    p, path, v = pick(rng, scalars if scalars and (scalar or rng.random() < 0.5) else leaves)
    if is_array(v):
        new = {**v, "array": pick(rng, [d for d in DTYPES if d != v["array"]])}
    elif type(v) is float:
        new = r_int(rng)
    else:
        new = r_float(rng)
    return with_leaf(s, p, path, new)


def m_weak(rng, s):
    options = [(p, path, v) for p, path, v in all_leaves(s)
               if not is_array(v) or (v["shape"] == [] and v["array"] in ("float32", "int32"))]
    if not options:
        return None
    p, path, v = pick(rng, options)
    if type(v) is float:
        new = r_array(rng, "float32", [])
    elif type(v) is int:
        new = r_array(rng, "int32", [])
    else:
        new = r_float(rng) if v["array"] == "float32" else r_int(rng)
    return with_leaf(s, p, path, new)


def m_static_value(rng, s):
    out = copy.deepcopy(s)
    out["mode"] = pick(rng, [m for m in MODES if m != s["mode"]])
    if s["how"]["mode"] == "default":
        out["how"]["mode"] = "kw"
        out["kw_order"].insert(int(rng.integers(len(out["kw_order"]) + 1)), "mode")
    return out


def set_mode_how(rng, s, new_how):
    out = copy.deepcopy(s)
    out["how"]["mode"] = new_how
    out["kw_order"] = [k for k in out["kw_order"] if k != "mode"]
    if new_how == "kw":
        out["kw_order"].insert(int(rng.integers(len(out["kw_order"]) + 1)), "mode")
    return out


def m_static_how(rng, s):
    ways = ["kw"]
    if s["how"]["scale"] == "pos":
        ways.append("pos")
    if s["mode"] == "sum":
        ways.append("default")
    ways = [w for w in ways if w != s["how"]["mode"]]
    return set_mode_how(rng, s, pick(rng, ways)) if ways else None


def m_pytree(rng, s, structural=False):
    x = s["x"]
    if is_node(x, "tuple"):
        items = x["tuple"]
        options = ["append", "to_dict"] + (["drop"] if len(items) > 1 else ["unwrap"])
    elif is_node(x, "dict"):
        options = ["to_tuple"] + (["drop_key"] if len(x["dict"]) > 1 else [])
        options += ["add_key", "rename"] if len(x["dict"]) < len(KEYS) else []
    else:
        options = ["wrap", "wrap2", "dict1"]
    if structural:  # same leaves, another structure
        options = [o for o in options if o in ("to_dict", "to_tuple", "rename", "unwrap", "wrap", "dict1")]
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
    elif op == "rename":
        old = pick(rng, list(x["dict"]))
        fresh = pick(rng, [k for k in KEYS if k not in x["dict"]])
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


def m_arg_how(rng, s):
    how = s["how"]
    if how["mode"] == "pos":
        return None
    state = (how["x"], how["scale"])
    nxt = {("pos", "pos"): [("pos", "kw")], ("pos", "kw"): [("pos", "pos"), ("kw", "kw")],
           ("kw", "kw"): [("pos", "kw")]}[state]
    new = pick(rng, nxt)
    out = copy.deepcopy(s)
    out["how"]["x"], out["how"]["scale"] = new
    kw = [k for k in s["kw_order"] if out["how"][k] == "kw"]
    for p in ("x", "scale"):
        if out["how"][p] == "kw" and p not in kw:
            kw.insert(int(rng.integers(len(kw) + 1)), p)
    out["kw_order"] = kw
    return out


def m_neutral(rng, s, prefer=None):
    """A change the cache key does not see (or no change at all); `prefer` picks one if it applies."""
    out = copy.deepcopy(s)
    options = ["repeat"]
    leaves = all_leaves(s)
    if any(not is_array(v) for _, _, v in leaves):
        options.append("value")
    if any(is_array(v) for _, _, v in leaves):
        options.append("numpy")
    if is_node(s["x"], "dict") and len(s["x"]["dict"]) > 1:
        options.append("dict_order")
    if len(s["kw_order"]) > 1:
        options.append("kw_order")
    op = prefer if prefer in options else pick(rng, options)
    if op == "value":
        p, path, v = pick(rng, [(p, path, v) for p, path, v in leaves if not is_array(v)])
        return with_leaf(s, p, path, r_float(rng) if type(v) is float else r_int(rng))
    if op == "numpy":
        p, path, v = pick(rng, [(p, path, v) for p, path, v in leaves if is_array(v)])
        new = {"array": v["array"], "shape": v["shape"]}
        if not v.get("numpy"):
            new["numpy"] = True
        return with_leaf(s, p, path, new)
    if op == "dict_order":
        items = list(s["x"]["dict"].items())
        order = rng.permutation(len(items))
        if list(order) == list(range(len(items))):
            order = order[::-1]
        out["x"] = {"dict": dict(items[i] for i in order)}
    elif op == "kw_order":
        out["kw_order"] = s["kw_order"][1:] + s["kw_order"][:1]
    return out


MUTATIONS = {"shape": m_shape, "dtype": m_dtype, "weak": m_weak, "static_value": m_static_value,
             "static_how": m_static_how, "pytree": m_pytree, "arg_how": m_arg_how}


def mutate(rng, categories, states):
    """Apply the first of `categories` that fits to a random earlier call."""
    order = [int(i) for i in rng.permutation(len(states))]
    for category in categories:
        for i in order:
            new = MUTATIONS[category](rng, states[i])
            if new is not None:
                return new
    raise RuntimeError(f"no call accepts a {categories} change")


def any_kind(rng):
    return [str(c) for c in rng.permutation(list(MUTATIONS))]


def draw_sequence(rng, category):
    length = int(rng.integers(3, 6))
    if category == "static_default":
        base = r_call(rng, mode_how="default", xs_how=("pos", "pos"))
        states = [base, set_mode_how(rng, base, "kw"), set_mode_how(rng, base, "pos")]
        states = [states[i] for i in rng.permutation(3)]
        while len(states) < length:
            states.append(m_neutral(rng, pick(rng, states)))
        return states
    if category == "revisit":
        a = r_call(rng)
        b = mutate(rng, any_kind(rng), [a])
        states = [a, b, m_neutral(rng, a)]
        while len(states) < length:
            states.append(m_neutral(rng, states[len(states) - 2]))
        return states
    constraints = {"static_how": {"xs_how": ("pos", "pos"), "mode_how": str(rng.choice(["default", "kw"]))},
                   "arg_how": {"mode_how": str(rng.choice(["default", "kw"]))},
                   "no_change": {"x_kind": "dict", "mode_how": "kw", "xs_how": ("pos", "kw")},
                   "weak": {"scalar_scale": True}, "dtype": {"scalar_scale": "python"}}
    states = [r_call(rng, **constraints.get(category, {}))]
    if category == "no_change":  # a reordered dict and reordered keywords, then anything neutral
        for prefer in ["dict_order", "kw_order"] + [None] * (length - 3):
            states.append(m_neutral(rng, states[-1], prefer))
        return states
    if category == "dtype":  # the first change swaps a Python int and float
        states.append(m_dtype(rng, states[0], scalar=True))
    if category == "pytree":  # the first change keeps the leaves and changes only the structure
        states.append(m_pytree(rng, states[0], structural=True))
    while len(states) < length:
        if len(states) > 1 and rng.random() < 0.35:
            states.append(m_neutral(rng, pick(rng, states)))
        else:
            kinds = any_kind(rng) if category == "mixed" else [category]
            states.append(mutate(rng, kinds, states))
    return states


def draw_sequences(rng):
    return [(category, [to_call(s) for s in draw_sequence(rng, category)]) for category in PLAN]


def test_predicts_random_sequences(submission, truth, rng):
    sequences = draw_sequences(rng)
    counts = truth.probe("ex01_recompile:count_sequences", [calls for _, calls in sequences],
                         int(rng.integers(2**31)))["counts"]
    misses = []
    for (category, calls), true_count in zip(sequences, counts):
        got = as_count(submission.call("predict_compiles", calls), "predict_compiles")
        if got != true_count:
            misses.append((category, got > true_count))
    if misses:
        lines = []
        for about in dict.fromkeys(CATEGORIES[c] for c, _ in misses):
            sides = {high for c, high in misses if CATEGORIES[c] == about}
            side = "too many" if sides == {True} else "too few" if sides == {False} else "wrong numbers of"
            lines.append(f"- {about} (you predicted {side} compilations)")
        raise CheckFailed(
            f"predict_compiles is wrong on {len(misses)} of {len(sequences)} random call sequences",
            measured="the sequences you got wrong are about:\n" + "\n".join(lines),
            expected="the number of compilations JAX really makes for every sequence",
            hint="build sequences of that kind yourself and run them on a fresh jax.jit with JAX_LOG_COMPILES=1 "
                 "and JAX_EXPLAIN_CACHE_MISSES=1; then fix the rule in your cache key",
        )


# ---------------------------------------------------------------------------------------
# Part B: one workload, drawn from the seed, run once and judged twice
# ---------------------------------------------------------------------------------------

SERVE_MODES = ("probs", "logz", "entropy")


def draw_workload(rng):
    """Requests over 2 shapes x 2-3 modes; every (shape, mode) pair sees shift both as a Python
    float and as an array, and mode both positionally and by keyword."""
    shapes = []
    while len(shapes) < 2:  # batch sizes 4..7: the public check uses 2 and 3
        shape = (int(rng.integers(4, 8)), int(rng.integers(3, 9)))
        if shape not in shapes:
            shapes.append(shape)
    modes = [str(m) for m in rng.permutation(SERVE_MODES)[: int(rng.integers(2, 4))]]
    pairs = [(shape, mode) for shape in shapes for mode in modes]
    plan = []
    for shape, mode in pairs:
        extra = [(bool(rng.random() < 0.5), bool(rng.random() < 0.5))]
        for shift_is_array, mode_kw in [(False, False), (True, True)] + extra:
            plan.append((shape, mode, shift_is_array, mode_kw))
    plan = [plan[i] for i in rng.permutation(len(plan))]
    requests = []
    for shape, mode, shift_is_array, mode_kw in plan:
        logits = (rng.normal(size=shape) * 2).astype(np.float32)
        temperature = float(rng.uniform(0.5, 2.0))
        shift = float(rng.uniform(-1, 1))
        args = [logits, temperature, np.asarray(shift, np.float32) if shift_is_array else shift]
        kwargs = {"mode": mode} if mode_kw else {}
        if not mode_kw:
            args.append(mode)
        requests.append({"args": args, "kwargs": kwargs})
    return requests, len(pairs)


@pytest.fixture(scope="module")
def workload(submission, seed):
    rng = np.random.default_rng([seed, zlib.crc32(b"ex01-workload")])
    requests, budget = draw_workload(rng)
    outputs, compiles = count_compiles(submission, "score", requests)
    return requests, budget, outputs, compiles


def test_workload_outputs_correct(workload):
    requests, _, outputs, _ = workload
    for req, out in zip(requests, outputs):
        expected = expected_score(req)
        what = f"score(...) in mode {mode_of(req['args'], req['kwargs'])!r}"
        out = expect_array(out, shape=expected.shape, dtype="float32", what=what)
        expect_close(out, expected, rtol=1e-4, atol=1e-5, what=what,
                     hint="z = (logits + shift) / temperature; probs = softmax(z), logz = logsumexp(z), "
                          "entropy = -sum(p * log p); all along the last axis")


def test_workload_within_compile_budget(workload):
    _, budget, _, compiles = workload
    expect_compiles(compiles, at_least=1, at_most=budget, what="score",
                    hint=f"this workload used {budget} (logits shape, mode) pairs, each with many temperatures, shift "
                         "as a Python float and as an array, and mode positional and by keyword; keep `mode` static "
                         "and `temperature` traced, and hand your jitted function the same kind of arguments every "
                         "time")
