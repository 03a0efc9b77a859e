"""Hidden checks for exercise 6: primitive counts on functions written at grading time,
and the reading answers judged against the jaxprs of the installed JAX."""

from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.extend.core import ClosedJaxpr

from grader import ir
from grader.checks.ex06_jaxpr import expect_x64_off, first_holder, trace
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
# The constructs `counts_inside_every_construct` puts at the top level (simplest first), and how
# each is described to the learner when a count around it goes wrong.
DESCRIBE = {
    "jit": "a call of a jax.jit-decorated helper",
    "scan": "lax.scan",
    "cond": "lax.cond (sometimes with the same function as both branches)",
    "while": "lax.while_loop",
    "custom_jvp": "a jax.custom_jvp function",
    "custom_vjp": "a jax.custom_vjp function",
    "checkpoint": "jax.checkpoint (its sub-jaxpr is a bare Jaxpr, not a ClosedJaxpr)",
    "shared_jit": "one jitted helper called twice (the same sub-jaxpr in two places)",
}


class FunctionWriter:
    """Writes the source of `f(x, w)`: helpers `g1, g2, ...` nest up to `max_depth` deep."""

    def __init__(self, rng, constructs=CONSTRUCTS, max_depth=2):
        self.rng = rng
        self.constructs = tuple(constructs)
        self.max_depth = max_depth
        self.defs = []
        self.count = 0

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
            if depth < self.max_depth and self.rng.random() < 0.4:
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

    def construct(self, kind, depth, rank):
        k = int(self.rng.integers(2, 5))
        c = self._const()
        if kind == "vmap" and rank == 0:
            kind = "jit"
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

    def function(self, force=None):
        """The whole source; `force` puts that construct at the top level.  The top level always
        holds at least one higher-order primitive with a non-empty sub-jaxpr."""
        lines = ["v = x"]
        n_lines = int(self.rng.integers(2, 5))
        at = int(self.rng.integers(n_lines))
        for i in range(n_lines):
            if i == at:  # never vmap here: it adds no equation of its own
                lines += self.construct(force or self._pick([k for k in self.constructs if k != "vmap"]), 0, 1)
            elif self.rng.random() < 0.25:
                lines += self.construct(self._pick(self.constructs), 0, 1)
            else:
                lines += self.leaf(True)
        ret = self._pick(("return v", "return v, jnp.sum(v)"))
        body = "".join(f"    {part}\n" for line in lines for part in line.split("\n"))
        return "\n".join(self.defs) + "\n\ndef f(x, w):\n" + body + f"    {ret}\n"


def random_function(rng, **kwargs):
    n = int(rng.integers(2, 6))
    force = kwargs.pop("force", None)
    return FunctionWriter(rng, **kwargs).function(force), [[[n], "float32"], [[n, n], "float32"]]


# --------------------------------------------------------------------------------------
# Judging counts, with a diagnosis of the usual mistakes (computed here, never shown raw)
# --------------------------------------------------------------------------------------

def _every_sub(params):
    return jaxprs_in_params(params)


def _closed_subs_only(params):  # a walk that ignores bare Jaxprs (what checkpoint holds)
    for value in params.values():
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, ClosedJaxpr):
                yield item.jaxpr


def _jaxpr_param_only(params):  # a walk that only looks at a param called "jaxpr"
    sub = params.get("jaxpr")
    if sub is not None:
        yield getattr(sub, "jaxpr", sub)


def _walk(closed, *, subs=_every_sub, count_holders=True, dedupe=False):
    counts, seen, stack = Counter(), set(), [closed.jaxpr]
    while stack:
        j = stack.pop()
        if dedupe:
            if id(j) in seen:
                continue
            seen.add(id(j))
        for eqn in j.eqns:
            inner = list(subs(eqn.params)) if subs is not None else []
            if count_holders or not any(True for _ in jaxprs_in_params(eqn.params)):
                counts[eqn.primitive.name] += 1
            stack.extend(inner)
    return dict(counts)


def diagnose(counts, closed):
    """What went wrong, when the learner's counts equal those of a known wrong walk."""
    known = [
        (_walk(closed, subs=None),
         "you count only the top-level equations: descend into every sub-jaxpr held in eqn.params, recursively"),
        (_walk(closed, count_holders=False),
         "you count what is inside sub-jaxprs but not the equation holding them: a jit/scan/cond/... equation "
         "counts once itself"),
        (_walk(closed, dedupe=True),
         "you skip sub-jaxprs you have seen before: a helper used in two places (or as both branches of a cond) "
         "counts in each place"),
        (_walk(closed, subs=_jaxpr_param_only),
         "you only look inside a param named 'jaxpr': cond keeps its sub-jaxprs in 'branches' (a tuple), and "
         "while_loop and custom_jvp/custom_vjp use other names; look at every param value"),
        (_walk(closed, subs=_closed_subs_only),
         "you only descend into ClosedJaxpr values: jax.checkpoint holds a bare Jaxpr"),
    ]
    truth = ir.primitive_counts(closed)
    matches = [text for wrong, text in known if counts == wrong and wrong != truth]
    if len(matches) > 1:  # on this function several mistakes give the same counts
        return "one of these: " + " -- OR -- ".join(matches)
    return matches[0] if matches else ""


def judge_counts(got, closed, what):
    expect_x64_off(got)
    counts = got["counts"]
    if counts is None:
        raise CheckFailed(f"count_primitives should return a dict with str keys ({what})",
                          measured=f"a {got['type']}" + (f" with keys of type {got['key_types']}" if got["key_types"] else ""),
                          expected="a dict {primitive name: count}",
                          hint="use eqn.primitive.name (a str) as the key")
    bad = sorted(k for k, v in counts.items() if type(v) is not int)
    if bad:
        raise CheckFailed(f"count_primitives: every count should be a Python int ({what})",
                          measured=f"{len(bad)} value(s) that are not ints", expected="int values",
                          hint="count with a dict or collections.Counter; avoid NumPy integers")
    truth = ir.primitive_counts(closed)
    if counts == truth:
        return
    wrong_names = sum(1 for k in set(counts) | set(truth) if counts.get(k, 0) != truth.get(k, 0))
    total, right_total = sum(counts.values()), sum(truth.values())
    direction = "too few" if total < right_total else "too many" if total > right_total else "the right number of"
    hint = diagnose(counts, closed) or ("print the jaxpr of a function built like this one and count by hand: every "
                                        "equation at every depth once, including the higher-order equation itself")
    raise CheckFailed(
        f"count_primitives is wrong for {what}",
        measured=f"{wrong_names} primitive name(s) have the wrong count; in all you counted {direction} equations",
        expected="one count per equation at every nesting depth, for every primitive that occurs",
        hint=hint,
    )


@pytest.mark.parametrize("case", range(4))
def test_counts_nested_primitives(submission, rng, case):
    source, specs = random_function(np.random.default_rng([int(rng.integers(2**31)), case]))
    got = submission.probe("ex06_jaxpr:count_in_source", source, "f", specs)
    judge_counts(got, trace(source, "f", specs), "a function nesting jit, scan, cond, while, checkpoint, "
                                                 "custom_jvp/custom_vjp and vmap in random ways")


@pytest.mark.parametrize("kind", list(DESCRIBE))
def test_counts_inside_every_construct(submission, rng, kind):
    rng = np.random.default_rng([int(rng.integers(2**31)), list(DESCRIBE).index(kind)])
    source, specs = random_function(rng, force=kind, max_depth=1, constructs=("jit",))
    got = submission.probe("ex06_jaxpr:count_in_source", source, "f", specs)
    judge_counts(got, trace(source, "f", specs), f"a function built around {DESCRIBE[kind]}")


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


@pytest.mark.parametrize("key", sorted(QUESTIONS))
def test_reading_answers(submission, key):
    kind, what, hint = QUESTIONS[key]
    probed = submission.probe("ex06_jaxpr:answers")
    got = probed["answers"]
    if not isinstance(got, dict) or key not in got:
        raise CheckFailed(f"answers() has no answer for {key!r}",
                          measured=type(got).__name__ if not isinstance(got, dict) else f"keys {sorted(got)[:10]}",
                          expected=f"a dict with the key {key!r}", hint="use exactly the keys the stub lists")
    answer = normalise(kind, got[key])
    if answer is None:
        raise CheckFailed(f"answers()[{key!r}] has the wrong type", measured=type(got[key]).__name__,
                          expected={"str": "a str", "int": "an int", "list": "a list of str"}[kind], hint=hint)
    if answer != truth_of(key):
        raise CheckFailed(f"answers()[{key!r}] is not what the installed JAX's jaxpr shows",
                          measured=f"your answer: {got[key]!r}", expected=what, hint=hint)
