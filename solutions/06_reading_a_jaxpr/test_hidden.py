"""Hidden checks for exercise 6: primitive counts on functions written at grading time,
and the reading answers judged against the jaxprs of the installed JAX.

`counts_inside_every_construct` writes one function around EACH kind of higher-order
construct (every kind, every seed: `COVERAGE` replays the writer's own record of what it
put at the top level); `counts_nested_primitives` writes four functions that nest
constructs at random, at least one construct inside another.  A failed count says around
which construct(s) the counts went wrong and, when the learner's counts equal those of a
known wrong walk, which mistake; never the function or its counts."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from grader import ir
from grader.coverage import Coverage, ensure
from grader.exercises.ex06_jaxpr.judges import count_problem, expect_mapping, fail_counts, first_holder, trace
from grader.feedback import CheckFailed
from grader.jaxcompat import jaxprs_in_params

# --------------------------------------------------------------------------------------
# Random functions: `f(x, w)` with x: f32[n], w: f32[n, n], from random building blocks
# --------------------------------------------------------------------------------------

LEAVES = (
    "v = jnp.sin(v)",
    "v = jnp.cos(v) + v",
    "v = jnp.tanh(v) * {c}",
    "v = v * v - {c}",
    "v = jnp.exp(-v * v)",
    "v = jnp.maximum(v, {c})",
    "v = jnp.where(v > {c}, v, {c} * v)",
    "v = jax.nn.relu(v) + {c}",
    "v = v - jnp.mean(v)",
    "v = v / (1.0 + jnp.abs(v))",
    "v = jnp.clip(v, -{c}, {c})",
    "v = jax.nn.sigmoid(v)",
    "v = v * jnp.sum(v)",
    "v = jnp.sqrt(v * v + {c})",
    "v = jnp.log1p(jnp.abs(v))",
    "v = v ** 3",
    "v = jax.nn.softplus(v)",
)
TOP_ONLY = ("v = v @ w", "v = jnp.dot(w, v) + x")
CONSTRUCTS = ("jit", "shared_jit", "scan", "cond", "switch", "while", "fori", "checkpoint",
              "custom_jvp", "custom_vjp", "vmap")
# The constructs `counts_inside_every_construct` puts at the top level, and how each is
# described to the learner when a count around it goes wrong.
DESCRIBE = {
    "jit": "a call of a jax.jit-decorated helper",
    "shared_jit": "one jitted helper called twice (the same sub-jaxpr in two places)",
    "scan": "lax.scan",
    "fori": "lax.fori_loop with Python-int bounds (a scan in the jaxpr)",
    "cond": "lax.cond (sometimes with the same function as both branches)",
    "switch": "lax.switch with three branches (a cond with three branches in the jaxpr)",
    "while": "lax.while_loop (a condition and a body)",
    "checkpoint": "jax.checkpoint (remat2 in the jaxpr; its sub-jaxpr is a bare Jaxpr, not a ClosedJaxpr)",
    "custom_jvp": "a jax.custom_jvp function",
    "custom_vjp": "a jax.custom_vjp function",
    "vmap": "jax.vmap of a jitted helper (the jit equation, batched)",
}


class FunctionWriter:
    """Writes the source of `f(x, w)`: helpers `g1, g2, ...` nest up to `max_depth` deep."""

    def __init__(self, rng, constructs=CONSTRUCTS, max_depth=2):
        self.rng = rng
        self.constructs = tuple(constructs)
        self.max_depth = max_depth
        self.defs = []
        self.count = 0
        self.used = []  # (construct, depth) for every construct written, in order
        self.force_inner = False  # the next block that may hold a construct must hold one

    def _const(self):
        return f"{float(self.rng.uniform(0.1, 2.0)):.2f}"

    def _pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def leaf(self, top):
        template = self._pick(LEAVES + (TOP_ONLY if top else ()))
        while "{c}" in template:
            template = template.replace("{c}", self._const(), 1)
        return [template]

    def block(self, depth, rank, lines):
        out = []
        for _ in range(lines):
            forced, self.force_inner = self.force_inner and depth < self.max_depth, False
            if depth < self.max_depth and (forced or self.rng.random() < 0.4):
                out += self.construct(self._pick(self.constructs), depth, rank)
            else:
                out += self.leaf(False)
        return out

    def helper(self, depth, rank, decorator=""):
        self.count += 1
        name = f"g{self.count}"
        body = self.block(depth + 1, rank, int(self.rng.integers(1, 4)))
        src = (f"@{decorator}\n" if decorator else "") + f"def {name}(v):\n"
        src += "".join(f"    {part}\n" for line in body for part in line.split("\n")) + "    return v\n"
        self.defs.append(src)
        return name

    def construct(self, kind, depth, rank, jit_vmap=False):
        k = int(self.rng.integers(2, 5))
        c = self._const()
        if kind == "vmap" and rank == 0:
            kind = "jit"
        self.used.append((kind, depth))
        if kind == "vmap" and jit_vmap:  # a vmap that leaves an equation holding a sub-jaxpr behind
            return [f"v = jax.vmap({self.helper(depth, rank - 1, 'jax.jit')})(v)"]
        if kind == "jit":
            return [f"v = {self.helper(depth, rank, 'jax.jit')}(v)"]
        if kind == "shared_jit":
            h = self.helper(depth, rank, "jax.jit")
            return [self._pick((f"v = {h}({h}(v))", f"v = {h}(v) + {h}(v * {c})"))]
        if kind == "scan":
            h = self.helper(depth, rank)
            return [self._pick((
                f"v, _ = lax.scan(lambda c, _: ({h}(c), None), v, None, length={k})",
                f"v, ys = lax.scan(lambda c, s: ({h}(c * s), jnp.sum(c)), v, jnp.linspace(0.5, {c}, {k}))\n"
                f"v = v + jnp.sum(ys)",
            ))]
        if kind == "cond":
            a = self.helper(depth, rank)
            b = a if self.rng.random() < 0.3 else self.helper(depth, rank)
            return [f"v = lax.cond(jnp.sum(v) > {c}, {a}, {b}, v)"]
        if kind == "switch":
            hs = [self.helper(depth, rank) for _ in range(3)]
            return [f"v = lax.switch(jnp.argmax(jnp.stack([jnp.sum(v), jnp.max(v), {c}])), [{', '.join(hs)}], v)"]
        if kind == "while":
            h = self.helper(depth, rank)
            return [f"_, v = lax.while_loop(lambda s: s[0] < {k}, lambda s: (s[0] + 1, {h}(s[1])), (0, v))"]
        if kind == "fori":
            h = self.helper(depth, rank)
            return [f"v = lax.fori_loop(0, {k}, lambda i, c: {h}(c) * {c}, v)"]
        if kind == "checkpoint":
            return [f"v = jax.checkpoint({self.helper(depth, rank)})(v)"]
        if kind == "custom_jvp":
            h = self.helper(depth, rank, "jax.custom_jvp")
            self.defs.append(f"@{h}.defjvp\ndef {h}_jvp(primals, tangents):\n"
                             f"    return {h}(primals[0]), tangents[0] * {c}\n")
            return [f"v = {h}(v)"]
        if kind == "custom_vjp":
            h = self.helper(depth, rank, "jax.custom_vjp")
            self.defs.append(f"{h}.defvjp(lambda v: ({h}(v), v), lambda r, g: (g * r,))\n")
            return [f"v = {h}(v)"]
        if kind == "vmap":  # the helper sees one element: rank drops by one
            return [f"v = jax.vmap({self.helper(depth, rank - 1)})(v)"]
        raise ValueError(kind)

    def function(self, force=None, nest=False):
        """The whole source; `force` puts that construct at the top level.  The top level always
        holds at least one higher-order primitive with a non-empty sub-jaxpr; `nest` makes the
        helper of that construct hold another construct."""
        lines = ["v = x"]
        n_lines = int(self.rng.integers(2, 5))
        at = int(self.rng.integers(n_lines))
        for i in range(n_lines):
            if i == at:  # a bare vmap adds no equation of its own: here it wraps a jitted helper
                self.force_inner = nest
                lines += self.construct(force or self._pick([k for k in self.constructs if k != "vmap"]), 0, 1,
                                        jit_vmap=True)
                self.force_inner = False
            elif self.rng.random() < 0.25:
                lines += self.construct(self._pick(self.constructs), 0, 1)
            else:
                lines += self.leaf(True)
        ret = self._pick(("return v", "return v, jnp.sum(v)"))
        body = "".join(f"    {part}\n" for line in lines for part in line.split("\n"))
        return "\n".join(self.defs) + "\n\ndef f(x, w):\n" + body + f"    {ret}\n"


def random_function(rng, **kwargs):
    """(source, arg specs, constructs written as (kind, depth))."""
    n = int(rng.integers(2, 6))
    force, nest = kwargs.pop("force", None), kwargs.pop("nest", False)
    writer = FunctionWriter(rng, **kwargs)
    return writer.function(force, nest), [[[n], "float32"], [[n, n], "float32"]], writer.used


N_NESTED = 4


def draw_nested(rng):
    """The four functions of `counts_nested_primitives`: random constructs up to two deep, the
    first top-level construct always holding another one."""
    seeds = [int(rng.integers(2**31)) for _ in range(N_NESTED)]
    return [random_function(np.random.default_rng([s, case]), nest=True) for case, s in enumerate(seeds)]


def nested_labels(rng):
    return nested_labels_of(draw_nested(rng))


def draw_constructs(rng):
    """One function per kind of construct, that construct at its top level."""
    out = {}
    for i, kind in enumerate(DESCRIBE):
        out[kind] = random_function(np.random.default_rng([int(rng.integers(2**31)), i]), force=kind, max_depth=1,
                                    constructs=("jit",))
    return out


def construct_labels(rng):
    return {kind for kind, (_, _, used) in draw_constructs(rng).items() if (kind, 0) in used}


COVERAGE = {
    "counts_inside_every_construct": Coverage(required=set(DESCRIBE), labels=construct_labels,
                                              test="test_counts_inside_every_construct"),
    "counts_nested_primitives": Coverage(
        required={"a construct inside another", "a construct at the top level", "nesting in every function"},
        labels=nested_labels, test="test_counts_nested_primitives"),
}


# --------------------------------------------------------------------------------------
# Judging counts: grader.exercises.ex06_jaxpr.judges (shared with the public checks)
# --------------------------------------------------------------------------------------

def test_counts_nested_primitives(submission, rng):
    functions = draw_nested(rng)
    ensure("counts_nested_primitives", COVERAGE["counts_nested_primitives"].required, nested_labels_of(functions))
    problems = []
    for i, (source, specs, used) in enumerate(functions, 1):
        counts = expect_mapping(submission.probe("ex06_jaxpr:count_in_source", source, "f", specs))
        problem = count_problem(counts, trace(source, "f", specs))
        if problem:
            kinds = ", ".join(dict.fromkeys(DESCRIBE.get(k, k).split(" (")[0] for k, _ in used))
            problems.append((f"function {i} of {len(functions)}, which nests {kinds}", *problem))
    if problems:
        fail_counts("on functions that nest constructs", problems, len(functions))


def nested_labels_of(functions):
    out = set()
    for _, _, used in functions:
        if any(depth >= 1 for _, depth in used):
            out.add("a construct inside another")
        if any(depth == 0 for _, depth in used):
            out.add("a construct at the top level")
    if all(any(depth >= 1 for _, depth in used) for _, _, used in functions):
        out.add("nesting in every function")
    return out


def test_counts_inside_every_construct(submission, rng):
    functions = draw_constructs(rng)
    ensure("counts_inside_every_construct", DESCRIBE,
           {kind for kind, (_, _, used) in functions.items() if (kind, 0) in used})
    problems = []
    for kind, (source, specs, _) in functions.items():
        counts = expect_mapping(submission.probe("ex06_jaxpr:count_in_source", source, "f", specs))
        problem = count_problem(counts, trace(source, "f", specs))
        if problem:
            problems.append((f"around {DESCRIBE[kind]}", *problem))
    if problems:
        fail_counts("on functions built around one construct each", problems, len(functions))


# --------------------------------------------------------------------------------------
# Reading answers: each computed now, from this JAX's jaxprs
# --------------------------------------------------------------------------------------

def clip_negative(x):
    return jnp.where(x > 0, x, 0.0)


@jax.jit
def _double(x):
    return 2.0 * x


def calls_helper(x):
    return _double(x) + 1.0


def activation(x):
    return jax.nn.relu(x)


def layer(x, w, b):
    h = x @ w + b
    for _ in range(2):
        h = jnp.tanh(h)
    return jnp.where(h > 0, h, 0.1 * h)


def mixed_types(i, x):
    return i * 2, i / 2, i + x, i * 2.0, x > 1, jnp.sum(i), i // 2


def branchy(x, use_sin):
    if use_sin:
        x = jnp.sin(x)
    x = lax.cond(jnp.sum(x) > 0, lambda v: v * 2.0, lambda v: -v, x)
    return jnp.where(x > 1.0, x, 1.0)


def running_total(xs):
    def step(total, x):
        total = total + x * x
        return total, total

    return lax.scan(step, 0.0, xs)


def _f32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def _outer(fn, *args, **kwargs):
    return jax.make_jaxpr(fn, **kwargs)(*args).jaxpr


def _producer(jaxpr, var):
    return next(e for e in jaxpr.eqns if any(o is var for o in e.outvars))


def _holder_name(make):
    """The primitive a higher-order construct shows as, measured on a tiny function."""
    return first_holder(_outer(make, _f32(3))).primitive.name


def truth_of(key):
    if key == "where_selects_with":
        clip = _outer(clip_negative, _f32(4))
        inner = next(iter(jaxprs_in_params(_producer(clip, clip.outvars[0]).params)))
        return _producer(inner, inner.outvars[0]).primitive.name
    if key == "nested_call_primitive":
        return first_holder(_outer(calls_helper, _f32(4))).primitive.name
    if key == "relu_primitive":
        eqns = _outer(activation, _f32(4)).eqns
        return eqns[0].primitive.name
    if key == "layer_top_level_eqns":
        return len(_outer(layer, _f32(4, 3), _f32(3, 5), _f32(5)).eqns)
    if key == "mixed_output_dtypes":
        outs = _outer(mixed_types, jax.ShapeDtypeStruct((3,), jnp.int32), _f32(3)).outvars
        return [str(v.aval.dtype) for v in outs]
    if key == "branchy_cond_count":
        cond_name = _holder_name(lambda v: lax.cond(v[0] > 0, jnp.sin, jnp.cos, v))
        return ir.primitive_counts(jax.make_jaxpr(branchy, static_argnums=1)(_f32(4), True)).get(cond_name, 0)
    if key == "scan_body_eqns":
        body = next(iter(jaxprs_in_params(first_holder(_outer(running_total, _f32(5))).params)))
        return len(body.eqns)
    raise KeyError(key)


QUESTIONS = {
    "where_selects_with": ("str", "the primitive that makes the result inside the nested call jnp.where becomes "
                                  "(clip_negative)", "print jax.make_jaxpr(clip_negative)(jnp.ones(4)) and look "
                                  "inside the nested call: which equation produces its output?"),
    "nested_call_primitive": ("str", "the primitive of the equation calling the jitted helper (calls_helper)",
                              "print jax.make_jaxpr(calls_helper)(jnp.ones(4)); older JAX versions spelled it "
                              "differently, so read it from this one"),
    "relu_primitive": ("str", "the one top-level primitive of activation (jax.nn.relu)",
                       "print jax.make_jaxpr(activation)(jnp.ones(4)); jax.nn.relu carries its own derivative rule"),
    "layer_top_level_eqns": ("int", "the number of equations in layer's OUTER jaxpr",
                             "count only the outer `let` block; an equation holding a sub-jaxpr counts as one, and "
                             "broadcasting the bias may add an equation of its own"),
    "mixed_output_dtypes": ("list", "the dtypes of mixed_types' seven outputs, in order",
                            "read the type after each output variable (i32 -> 'int32', f32 -> 'float32'); "
                            "true division and Python floats promote ints"),
    "branchy_cond_count": ("int", "the number of cond equations in branchy(x, True), nested ones included",
                           "a Python `if` on a static value runs while tracing: it leaves no cond behind"),
    "scan_body_eqns": ("int", "the number of equations in running_total's scan body",
                       "print the jaxpr and count the body's `let` block; weak-typed carries can add an "
                       "equation you did not write"),
}
_SHORT_DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64", "i8": "int8",
                 "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8", "u32": "uint32", "bool": "bool"}


def _dtype_name(s):
    s = s.strip().lower()
    if s in _SHORT_DTYPES:
        return _SHORT_DTYPES[s]
    try:
        return np.dtype(s).name
    except TypeError:
        return s


def normalise(kind, value):
    """The learner's answer in canonical form, or None when it has the wrong type."""
    if kind == "str":
        return value.strip() if isinstance(value, str) else None
    if kind == "int":
        return value if type(value) is int else None
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return [_dtype_name(v) for v in value]
    return None


def test_reading_answers(submission):
    """All seven answers, judged together: one failure names every wrong answer."""
    got = submission.probe("ex06_jaxpr:answers")["answers"]
    if not isinstance(got, dict):
        advice = "return a dict with exactly the keys the stub's docstring lists"
        raise CheckFailed("answers() should return a dict", measured=type(got).__name__, expected="a dict",
                          hint=advice, advice=advice, diagnosis="answers() does not return a dict")
    missing = [key for key in sorted(QUESTIONS) if key not in got]
    if missing:
        advice = "return a dict with exactly the keys the stub's docstring lists"
        names = ", ".join(map(repr, missing))
        raise CheckFailed(f"answers() has no answer for {names}", measured=f"keys {sorted(got)[:10]}",
                          expected=f"a dict with the keys {sorted(QUESTIONS)}", hint=advice, advice=advice,
                          diagnosis=f"answers() has no answer for {names}")
    wrong_type, wrong = [], []
    for key in sorted(QUESTIONS):
        kind, what, hint = QUESTIONS[key]
        answer = normalise(kind, got[key])
        if answer is None:
            wrong_type.append((key, {"str": "a str", "int": "an int", "list": "a list of str"}[kind], hint))
        elif answer != truth_of(key):
            wrong.append((key, what, hint))
    if wrong_type:
        text = "; ".join(f"answers()[{key!r}] should be {expected}" for key, expected, _ in wrong_type)
        raise CheckFailed(text, measured="; ".join(f"{key}: a {type(got[key]).__name__}" for key, _, _ in wrong_type),
                          expected=text, hint=" -- ".join(h for _, _, h in wrong_type),
                          advice=" -- ".join(h for _, _, h in wrong_type), diagnosis=text)
    if wrong:
        if len(wrong) == 1:
            (key, what, _), = wrong
            message = f"answers()[{key!r}] is not what the installed JAX's jaxpr shows"
            diagnosis = f"answers()[{key!r}] ({what}) does not match the jaxpr of the installed JAX"
        else:
            message = (f"{len(wrong)} answers are not what the installed JAX's jaxpr shows: "
                       + ", ".join(repr(key) for key, _, _ in wrong))
            diagnosis = (f"{len(wrong)} answers do not match the jaxprs of the installed JAX: "
                         + "; ".join(f"{key!r} ({what})" for key, what, _ in wrong))
        advice = " -- ".join(f"{key}: {hint}" for key, _, hint in wrong)
        raise CheckFailed(message, measured="; ".join(f"{key}: your answer {got[key]!r}" for key, _, _ in wrong),
                          expected="; ".join(what for _, what, _ in wrong), hint=advice, advice=advice,
                          diagnosis=diagnosis)
