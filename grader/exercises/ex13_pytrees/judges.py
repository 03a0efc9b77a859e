"""Exercise 13 (pure functions and pytrees): draws, references and verdicts shared by the public and
the hidden checks.  NumPy only, references in float64; trees are descriptions
(``grader.exercises.ex13_pytrees.trees``), whose leaf order is JAX's.

Feedback for a hidden check says which *kind* of node or mistake it was (a namedtuple that came
back as a tuple, ``None`` treated as a leaf, leaves out of JAX's order, a counter that counts
traces), never a drawn key, shape or value: those go to ``measured`` and ``expected``, which only
the instructor reads.
"""

from __future__ import annotations

import numpy as np

from grader.exercises.ex13_pytrees import trees
from grader.feedback import CheckFailed

ACTIVATIONS = ("tanh", "relu", "sigmoid")  # the stub's ACTIVATIONS, by name
LEARNING_RATE = 0.1  # the stub's global LEARNING_RATE, which impure_step reads


# --- part A: tree functions ---------------------------------------------------------------------------

_NODE_ADVICE = {
    "namedtuple": ("a namedtuple came back as another type (a plain tuple, a list or a dict)",
                   "jax.tree.map rebuilds every node with its own type; a hand-written recursion must rebuild a "
                   "namedtuple as type(node)(*children), not tuple(children) -- or let jax.tree.map / "
                   "jax.tree.unflatten do it"),
    "none": ("a None node came back as something else",
             "None is a pytree node with no children, not a leaf: jax.tree.map and jax.tree.leaves skip it "
             "and keep it as None"),
    "dict": ("a dict came back with other keys, or as another type",
             "keep every dict a dict with the same keys; jax.tree.map does"),
    "list": ("a list came back as another type or with another number of children",
             "keep every list a list (and every tuple a tuple) with the same children"),
    "tuple": ("a tuple came back as another type or with another number of children",
              "keep every tuple a tuple (and every list a list) with the same children"),
    "leaf": ("a leaf came back as a container or as something that is not an array",
             "replace each array leaf by the value asked for, and nothing else"),
    "leaf_shape": ("a leaf came back with the wrong shape", "each leaf keeps the shape it had in the tree"),
    "leaf_dtype": ("a leaf came back with the wrong dtype", "each leaf keeps its float32 dtype"),
    "leaf_values": ("a leaf came back with the wrong values",
                    "the leaves must be the values asked for, in JAX's leaf order (unravel's: the values of the "
                    "vector it is given, not those of the tree ravel was called on)"),
    "shape": ("a shape came back wrong: it must be the leaf's shape as a tuple of Python ints",
              "use leaf.shape (or jnp.shape(leaf)); not a list, not the size, not a NumPy array"),
}


def _tree_failure(what: str, found: tuple[str, str, str], advice: str = "") -> CheckFailed:
    path, detail, kind = found
    diagnosis, default_advice = _NODE_ADVICE.get(kind, ("the tree came back with another structure",
                                                        "keep the tree's structure exactly"))
    return CheckFailed(f"{what} differs from what was asked at {path}: {detail}", measured=f"at {path}: {detail}",
                       expected="the same structure (every node's type and children) with the asked leaves",
                       hint=advice or default_advice, diagnosis=f"{what}: {diagnosis}",
                       advice=advice or default_advice)


def expected_shapes(desc: dict) -> dict:
    return trees.map_leaves(desc, lambda leaf: trees.shape_node(np.asarray(leaf["value"]).shape))


def judge_shapes(got: dict, desc: dict) -> None:
    found = trees.difference(got, expected_shapes(desc))
    if found:
        raise _tree_failure("tree_shapes(tree)", found)


def reference_norm(desc: dict) -> float:
    return float(np.sqrt(sum(np.sum(np.asarray(leaf["value"], np.float64) ** 2) for leaf in trees.jax_leaves(desc))))


def _norm_advice(got: float, desc: dict) -> str:
    leaves = [np.asarray(leaf["value"], np.float64) for leaf in trees.jax_leaves(desc)]
    squares = sum(float(np.sum(v ** 2)) for v in leaves)
    known = {
        "the sum of the leaves' own norms": sum(float(np.sqrt(np.sum(v ** 2))) for v in leaves),
        "the sum of squares, without the square root": squares,
        "the square root of the mean square": float(np.sqrt(squares / sum(v.size for v in leaves))),
        "the sum of absolute values": sum(float(np.sum(np.abs(v))) for v in leaves),
    }
    for name, value in known.items():
        if np.isclose(got, value, rtol=1e-5, atol=1e-6):
            return f"your number is {name}: the global norm is sqrt(sum over all leaves of sum(leaf ** 2))"
    return ("sqrt(sum over every leaf of jnp.sum(leaf ** 2)): every array leaf of the tree, wherever it sits "
            "(inside tuples, namedtuples and dicts); None holds no leaf")


def judge_norm(got: dict, desc: dict) -> None:
    want = reference_norm(desc)
    value = got.get("value") if got.get("kind") == "array" else None
    if value is None or np.asarray(value).shape != ():
        raise CheckFailed("global_norm(tree) should return a 0-d array", measured=f"{trees._what(got)}"
                          + (f" of shape {np.asarray(value).shape}" if value is not None else ""),
                          expected="a 0-d float32 array", hint="reduce everything to one number with jnp operations",
                          diagnosis="global_norm did not return a 0-d array",
                          advice="return jnp.sqrt(sum of jnp.sum(leaf ** 2) over the leaves): one 0-d array")
    value = np.asarray(value)
    if str(value.dtype) != "float32" or not np.isfinite(value) or not np.isclose(float(value), want, rtol=1e-5):
        advice = _norm_advice(float(value), desc) if np.isfinite(value) else "the norm came back as NaN or inf"
        if str(value.dtype) != "float32" and np.isclose(float(value), want, rtol=1e-5):
            advice = "the leaves are float32: keep the result float32 (no float64 NumPy arithmetic)"
        raise CheckFailed("global_norm(tree) differs from sqrt(sum of squares of every leaf)",
                          measured=f"{float(value)!r} ({value.dtype})", expected=f"{want:.7g} (float32, rtol 1e-5)",
                          hint=advice, diagnosis="global_norm's value differs from the square root of the sum of "
                                                 "squares over every leaf", advice=advice)


def expected_vec(desc: dict) -> np.ndarray:
    parts = [np.asarray(leaf["value"], np.float32).ravel() for leaf in trees.jax_leaves(desc)]
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)


def expected_unravel(desc: dict, new_vec: np.ndarray) -> dict:
    values, offset = [], 0
    for leaf in trees.jax_leaves(desc):
        shape = np.asarray(leaf["value"]).shape
        size = int(np.prod(shape, dtype=np.int64))
        values.append(np.asarray(new_vec[offset:offset + size], np.float32).reshape(shape))
        offset += size
    return trees.with_leaves(desc, values)


def judge_ravel(got: dict, desc: dict, new_vec: np.ndarray) -> None:
    if "error" in got:
        raise CheckFailed(got["error"], measured=str(got.get("got"))[:500], expected="(vec, unravel)",
                          hint="return vec, unravel", diagnosis="ravel did not return a pair (vec, unravel)",
                          advice="return a tuple: the 1-D vector and a function that rebuilds the tree from one")
    want = expected_vec(desc)
    vec = got["vec"]
    value = np.asarray(vec["value"]) if vec.get("kind") == "array" else None
    if value is None or value.shape != want.shape or str(value.dtype) != "float32":
        shown = f"{value.dtype}{list(value.shape)}" if value is not None else trees._what(vec)
        advice = ("vec is every leaf raveled and concatenated, in jax.tree.leaves order: "
                  "jnp.concatenate([jnp.ravel(leaf) for leaf in leaves]); None holds no leaf, a 0-d leaf is one "
                  "element")
        raise CheckFailed("ravel's vec is not a float32 vector of every leaf's elements", measured=shown,
                          expected=f"float32{list(want.shape)}", hint=advice,
                          diagnosis="vec does not hold every element of every leaf as one float32 vector",
                          advice=advice)
    if not np.array_equal(value, want):
        same_elements = np.array_equal(np.sort(value), np.sort(want))
        advice = ("the elements are all there, but not in JAX's order: take the leaves from jax.tree.flatten, "
                  "which sorts dict keys and follows a namedtuple's field order" if same_elements else
                  "vec must be the leaves' own values, raveled and concatenated in jax.tree.leaves order")
        raise CheckFailed("ravel's vec differs from the leaves concatenated in jax.tree.leaves order",
                          measured="same elements, another order" if same_elements else "other values",
                          expected="jnp.concatenate([jnp.ravel(l) for l in jax.tree.leaves(tree)])", hint=advice,
                          diagnosis="vec's elements are in another order than jax.tree.leaves gives" if same_elements
                          else "vec's values are not the leaves' values", advice=advice)
    found = trees.difference(got["unraveled"], expected_unravel(desc, new_vec), rtol=0, atol=0)
    if found:
        advice = ("unravel(v) cuts v into pieces of each leaf's size, in leaf order, reshapes each to its leaf's "
                  "shape and puts them back with jax.tree.unflatten(treedef, pieces); it must use the v it is given "
                  "(the grader passes a new vector, under jax.jit)")
        raise _tree_failure("unravel(new_vec)", found, advice if found[2].startswith("leaf") else "")


# --- part B: a registered dataclass ----------------------------------------------------------------------

def draw_dense(rng, d_in=None, d_out=None, batch=None) -> dict:
    d_in = int(rng.integers(2, 7)) if d_in is None else d_in
    d_out = int(rng.integers(2, 7)) if d_out is None else d_out
    batch = int(rng.integers(1, 6)) if batch is None else batch
    f = lambda *s: rng.normal(size=s).astype(np.float32)  # noqa: E731
    return {"w": f(d_in, d_out) / np.float32(np.sqrt(d_in)), "b": f(d_out) * np.float32(0.5), "x": f(batch, d_in),
            "cotangent": f(batch, d_out)}


def _act(name: str, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The activation and its derivative, float64."""
    if name == "tanh":
        a = np.tanh(h)
        return a, 1.0 - a ** 2
    if name == "relu":
        return np.maximum(h, 0.0), (h > 0).astype(np.float64)
    s = 1.0 / (1.0 + np.exp(-h))
    return s, s * (1.0 - s)


def reference_dense(case: dict, activation: str) -> dict:
    w, b, x, cot = (np.asarray(case[k], np.float64) for k in ("w", "b", "x", "cotangent"))
    h = x @ w + b
    out, d = _act(activation, h)
    dh = cot * d
    return {"output": out, "grad_w": x.T @ dh, "grad_b": dh.sum(axis=0)}


def judge_dense_pytree(view: dict, case: dict, activation: str) -> None:
    """Two leaves (w then b), the activation in the tree structure, and grad returning the class."""
    n = view["num_leaves"]
    if n != 2:
        advice = ("mark activation static: activation: str = dataclasses.field(metadata=dict(static=True)); a "
                  "static field is part of the tree structure (the treedef), not a leaf" if n == 3 else
                  "Dense(w, b, activation) must flatten to exactly two leaves, w and b")
        raise CheckFailed(f"jax.tree.leaves(Dense(...)) has {n} leaves", measured=f"{n} leaves",
                          expected="2 leaves: w, then b", hint=advice,
                          diagnosis=f"a Dense layer flattens to {n} leaves instead of 2 (w and b)", advice=advice)
    for got, key in zip(view["leaves"], ("w", "b")):
        if got.get("kind") != "array" or not np.array_equal(np.asarray(got["value"]), case[key]):
            advice = "the leaves are the array fields in declaration order: w, then b"
            raise CheckFailed("the leaves of Dense(...) are not w, then b", measured=trees._what(got),
                              expected=f"the layer's {key}", hint=advice,
                              diagnosis="a Dense layer's leaves are not its w and b, in that order", advice=advice)
    if "error" in view:
        raise _dense_error(view["error"])
    if not view["static_in_structure"]:
        advice = ("keep activation in the tree structure (a static field / aux data): two layers that differ only "
                  "in activation must have different jax.tree.structure, or unflattening loses it")
        raise CheckFailed("the activation is not part of the tree structure", measured="equal treedefs",
                          expected="different treedefs for different activations", hint=advice,
                          diagnosis="two layers that differ only in their activation have the same tree structure",
                          advice=advice)
    if view["grad_type"] != "same":
        advice = "register the class itself as a pytree, so jax.grad returns a Dense holding the gradients"
        raise CheckFailed("jax.grad in the layer did not return a Dense", measured=view["grad_type"],
                          expected="the learner's Dense class", hint=advice,
                          diagnosis="jax.grad of a function of the layer did not return your Dense class",
                          advice=advice)
    if view.get("grad_activation") != {"kind": "str", "value": activation}:
        advice = "the gradient is a Dense too: its static activation is the layer's own"
        raise CheckFailed("the gradient's activation differs from the layer's",
                          measured=trees._what(view.get("grad_activation") or {"kind": "none"}),
                          expected=repr(activation), hint=advice,
                          diagnosis="the Dense that jax.grad returned does not keep the layer's activation",
                          advice=advice)


def _dense_error(error: str) -> CheckFailed:
    advice = ("apply(layer, x) must run under jax.jit and jax.grad: a jitted apply takes the layer as an ordinary "
              "argument (never static: it holds arrays), and only the activation's name may be static, as a static "
              "field of the dataclass")
    return CheckFailed("apply(layer, x), or jax.grad through it, raised an error", measured=error,
                       expected="the layer's output and a Dense of gradients", hint=advice,
                       diagnosis="calling apply on a Dense layer, or differentiating through it, raised an error",
                       advice=advice)


def judge_dense_values(view: dict, case: dict, activation: str) -> None:
    if "error" in view:
        raise _dense_error(view["error"])
    ref = reference_dense(case, activation)
    for key, what in (("output", "apply(layer, x)"), ("grad_w", "the gradient's w"), ("grad_b", "the gradient's b")):
        got = view.get(key)
        value = np.asarray(got["value"]) if isinstance(got, dict) and got.get("kind") == "array" else None
        want = ref[key]
        if value is None or value.shape != want.shape or str(value.dtype) != "float32" or \
                not np.allclose(value.astype(np.float64), want, rtol=1e-4, atol=1e-5):
            advice = ("apply(layer, x) = ACTIVATIONS[layer.activation](x @ layer.w + layer.b), in float32; the "
                      "activation is the layer's own, chosen by its name")
            measured = (f"{value.dtype}{list(value.shape)}" if value is not None and value.shape != want.shape else
                        f"largest difference {float(np.max(np.abs(value - want))):.3g}" if value is not None else
                        trees._what(got or {"kind": "none"}))
            raise CheckFailed(f"{what} differs from the reference for activation {activation!r}", measured=measured,
                              expected=f"float32{list(want.shape)} within rtol 1e-4", hint=advice,
                              diagnosis=f"{what} differs from the reference for one of the activations",
                              advice=advice)


# --- part C: the pure step ------------------------------------------------------------------------------

def draw_run(rng, d=None, steps=None) -> dict:
    d = int(rng.integers(2, 6)) if d is None else d
    steps = int(rng.integers(5, 9)) if steps is None else steps
    batch = int(rng.integers(3, 7))
    w = rng.normal(size=d).astype(np.float32)
    batches = [{"x": rng.normal(size=(batch, d)).astype(np.float32),
                "y": rng.normal(size=batch).astype(np.float32)} for _ in range(steps)]
    lrs = [float(v) for v in rng.uniform(0.02, 0.3, size=steps)]
    while any(abs(lr - LEARNING_RATE) < 0.01 for lr in lrs):  # never the global's value
        lrs = [float(v) for v in rng.uniform(0.02, 0.3, size=steps)]
    return {"w": w, "batches": batches, "lrs": lrs}


def reference_run(run: dict, lrs=None) -> list[np.ndarray]:
    w = np.asarray(run["w"], np.float64)
    out = []
    for b, lr in zip(run["batches"], lrs or run["lrs"]):
        x, y = np.asarray(b["x"], np.float64), np.asarray(b["y"], np.float64)
        w = w - lr * (x.T @ (x @ w - y)) / len(y)
        out.append(w)
    return out


def judge_run(got: dict, run: dict) -> None:
    states, want = got["states"], reference_run(run)
    fixed = reference_run(run, [LEARNING_RATE] * len(run["lrs"]))
    for t, (state, w_want) in enumerate(zip(states, want), start=1):
        if "error" in state:
            advice = "pure_step returns a pair: (new_w, new_count)"
            raise CheckFailed("pure_step should return (new_w, new_count)", measured=trees._what(state["error"])
                              if "kind" in state["error"] else str(state["error"]), expected="a pair",
                              hint=advice, diagnosis="pure_step did not return a pair (new_w, new_count)",
                              advice=advice)
        count = state["count"]
        c = np.asarray(count["value"]) if count.get("kind") == "array" else None
        if c is None or c.shape != () or str(c.dtype) != "int32" or int(c) != t:
            got_counts = [int(np.asarray(s["count"]["value"])) for s in states
                          if s.get("count", {}).get("kind") == "array" and np.asarray(s["count"]["value"]).size == 1]
            per_trace = len(got_counts) == len(states) and got_counts[-1] < len(states)
            advice = ("the count must come in as an argument and go out as count + 1: a global bumped inside a "
                      "jitted function runs once per trace, not once per call, and what the function returns is the "
                      "number it had while tracing, baked in as a constant" if per_trace else
                      "new_count = count + 1, an int32 0-d array (count comes in as one)")
            raise CheckFailed(f"after {t} call(s) of pure_step the count is not {t}",
                              measured=f"counts returned: {got_counts}" if got_counts else trees._what(count),
                              expected=f"counts 1..{len(states)}, int32 0-d arrays", hint=advice,
                              diagnosis="the count does not go up by one on every call" + (
                                  ": it counts traces, not calls" if per_trace else ""), advice=advice)
        w = state["w"]
        value = np.asarray(w["value"]) if w.get("kind") == "array" else None
        if value is None or value.shape != w_want.shape or str(value.dtype) != "float32" or \
                not np.allclose(value.astype(np.float64), w_want, rtol=1e-4, atol=1e-5):
            stale = value is not None and value.shape == w_want.shape and np.allclose(
                value.astype(np.float64), fixed[t - 1], rtol=1e-4, atol=1e-5)
            advice = ("the learning rate must come from the lr argument, never from the global LEARNING_RATE: under "
                      "jit a global is read once, while tracing, and kept as a constant" if stale else
                      "new_w = w - lr * jax.grad(loss)(w, x, y), with this call's lr, x and y")
            raise CheckFailed(f"pure_step's w after {t} call(s) differs from gradient descent with the lr passed",
                              measured="equals steps with the global LEARNING_RATE" if stale else (
                                  f"largest difference {float(np.max(np.abs(value - w_want))):.3g}"
                                  if value is not None and value.shape == w_want.shape else trees._what(w)),
                              expected="w - lr * grad of loss, each call's own lr (rtol 1e-4)", hint=advice,
                              diagnosis="the parameters follow the global learning rate, not the one passed in"
                              if stale else "the parameters after some step differ from gradient descent with each "
                                            "call's own learning rate", advice=advice)
    if len(states) != len(want):
        raise CheckFailed("pure_step stopped before the end of the run", measured=f"{len(states)} steps",
                          expected=f"{len(want)}", diagnosis="pure_step did not run every step",
                          advice="return (new_w, new_count) from every call")


def judge_globals(got: dict) -> None:
    changed = got["globals_changed"]
    if changed:
        advice = ("pure_step may read its arguments only and must keep nothing between calls: drop every `global` "
                  "and `nonlocal` statement and every write into a module-level dict, list, array or object (an "
                  "append, `STATE[k] = v`, `obj.attr = v`, `fn.calls += 1`, an attribute set on a module such as "
                  "`jnp` or on a module imported inside the function, a mutable default argument, an environment "
                  "variable); thread the state through the arguments and the return value")
        raise CheckFailed("calling pure_step changed state that outlives the call",
                          measured=f"changed, by the global name it is reached from (or, in parentheses, the "
                                   f"place): {', '.join(changed)}",
                          expected="nothing outside pure_step changes", hint=advice,
                          diagnosis="calling pure_step rebound a global variable of your module or wrote into one in "
                                    "place (its contents, a function's attribute, closure variable or default "
                                    "argument, a module's attribute) or into the process environment", advice=advice)


def dense_compiles(submission, reference, calls: list):
    """The compilations of ``apply`` over ``calls`` (``{"w", "b", "x", "activation"}``): the
    layers are built by one request, ``apply`` runs alone in the next, measured beside the
    reference solution's run of the same two requests (``grader.testing``)."""
    from grader.testing import probe_compiles, probe_pair

    probe_pair(submission, reference, "ex13_pytrees:prepare_dense", "dense", calls)
    return probe_compiles(submission, reference, "ex13_pytrees:dense_compiles", "dense")[1]


def pure_run_compiles(submission, reference, run: dict):
    """The compilations of one recorded ``pure_run`` (a new learning rate every call), beside
    the reference solution's same request; and the learner's run."""
    from grader.testing import probe_compiles

    got, compiles = probe_compiles(submission, reference, "ex13_pytrees:pure_run", run["w"], run["batches"],
                                   run["lrs"], True)
    return got, compiles
