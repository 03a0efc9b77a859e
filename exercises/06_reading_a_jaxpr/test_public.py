"""Public checks for exercise 6 (run by `grade exercise 6`; they carry no points).

`counts_example_functions` counts the stub's three examples; `counts_every_construct` counts
six small functions written out below, one around each way a sub-jaxpr can hide (a helper
used twice, a cond with the same branch twice, a three-branch switch, checkpoint and fori
inside a while, relu and where inside a scan, custom_vjp under vmap).  The hidden checks
count primitives in functions you have never seen (built at grading time from nested jit,
scan, cond, while, checkpoint, custom_jvp/custom_vjp, vmap...) and check every reading
answer against the jaxprs of the installed JAX.
"""

import jax
import jax.numpy as jnp
import pytest

from grader import ir
from grader.exercises.ex06_jaxpr.judges import (GENERIC_ADVICE, count_problem, expect_mapping, expect_x64_off,
                                                first_holder, trace)
from grader.feedback import CheckFailed

# The stub's example functions, written out here so the check does not trust your copy.
EXAMPLES = {
    "example_mlp": ('''
def example_mlp(x, w1, w2):
    h = jax.nn.relu(x @ w1)
    return jnp.tanh(h @ w2)
''', [[[4, 3], "float32"], [[3, 8], "float32"], [[8, 2], "float32"]]),
    "example_scan": ('''
def example_scan(xs):
    def step(carry, row):
        total, biggest = carry
        return (total + row, jnp.maximum(biggest, row)), jnp.sum(row)

    start = (jnp.zeros(3), jnp.full(3, -jnp.inf))
    (total, biggest), row_sums = lax.scan(step, start, xs)
    return total, biggest, row_sums
''', [[[6, 3], "float32"]]),
    "example_branch": ('''
@jax.jit
def _unit(v):
    return v / jnp.sqrt(jnp.sum(v * v))


def example_branch(x):
    return lax.cond(jnp.sum(x) > 0, _unit, lambda v: jnp.where(v > 0, v, 0.0), x)
''', [[[5], "float32"]]),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_counts_example_functions(submission, name):
    source, specs = EXAMPLES[name]
    got = submission.probe("ex06_jaxpr:count_in_source", source, name, specs)
    truth = ir.primitive_counts(trace(source, name, specs))
    what = f"count_primitives(jax.make_jaxpr({name})(...))"
    expect_x64_off(got)
    counts = got["counts"]
    if counts is None:
        raise CheckFailed(f"{what} should return a dict with str keys",
                          measured=f"a {got['type']}" + (f" with keys of type {got['key_types']}" if got["key_types"] else ""),
                          expected="a dict like {'sin': 2, 'jit': 1}",
                          hint="use the primitive's name, eqn.primitive.name, as the key")
    bad_values = sorted(k for k, v in counts.items() if type(v) is not int)
    if bad_values:
        raise CheckFailed(f"{what}: every count should be a Python int",
                          measured=f"non-int values for {bad_values}", expected="int values",
                          hint="count with a dict or collections.Counter; avoid NumPy integers")
    if counts != truth:
        diff = {k: (counts.get(k, 0), truth.get(k, 0)) for k in sorted(set(counts) | set(truth))
                if counts.get(k, 0) != truth.get(k, 0)}
        raise CheckFailed(
            f"{what} does not match the jaxpr",
            measured="yours vs the jaxpr's: " + ", ".join(f"{k}: {a} vs {b}" for k, (a, b) in diff.items()),
            expected=str(dict(sorted(truth.items()))),
            hint="print the jaxpr: every equation counts once, the equations inside each sub-jaxpr count too, "
                 "and so does the equation (jit, scan, cond, custom_jvp_call...) that holds them",
        )


# One small function around each place a sub-jaxpr can hide: `f` in each source, traced on
# the given [shape, dtype] arguments (with jax, jnp and lax in scope, nothing else).
CONSTRUCTS = {
    "a_helper_used_in_three_places": ("one jitted helper called in three places (one sub-jaxpr, three equations)", '''
@jax.jit
def _scale(v):
    return v * 2.0 + 1.0


def f(x):
    return _scale(_scale(x)) + _scale(jnp.sin(x))
''', [[[4], "float32"]]),
    "cond_with_one_branch_twice": ("lax.cond whose two branches are the same function", '''
def _shrink(v):
    return jnp.tanh(v) * 0.5


def f(x):
    return lax.cond(jnp.sum(x) > 0, _shrink, _shrink, x)
''', [[[4], "float32"]]),
    "switch_with_three_branches": ("lax.switch with three one-line branches (a cond with three branches)", '''
def f(x):
    return lax.switch(jnp.argmax(x) % 3, [jnp.sin, jnp.cos, lambda v: -v], x)
''', [[[4], "float32"]]),
    "checkpoint_and_fori_in_a_while": ("jax.checkpoint (remat2, a bare Jaxpr) and lax.fori_loop inside a "
                                       "lax.while_loop", '''
def f(x):
    def body(state):
        i, v = state
        v = jax.checkpoint(lambda u: jnp.exp(jnp.sin(u)))(v)
        v = lax.fori_loop(0, 2, lambda k, u: u * 0.5, v)
        return i + 1, v

    return lax.while_loop(lambda state: state[0] < 3, body, (0, x))[1]
''', [[[4], "float32"]]),
    "relu_and_where_in_a_scan": ("jax.nn.relu (a jit inside a custom_jvp_call) and jnp.where inside a scan body", '''
def f(xs):
    def step(total, row):
        return total + jax.nn.relu(row), jnp.where(row > 0, row, 0.0)

    return lax.scan(step, jnp.zeros(4), xs)
''', [[[3, 4], "float32"]]),
    "custom_vjp_under_vmap": ("a jax.custom_vjp function inside a jitted helper, under jax.vmap", '''
@jax.custom_vjp
def _soft(v):
    return jnp.tanh(v)


_soft.defvjp(lambda v: (jnp.tanh(v), v), lambda v, g: (g * (1.0 - jnp.tanh(v) ** 2),))


def f(xs):
    return jax.vmap(jax.jit(lambda row: _soft(row) * 2.0))(xs)
''', [[[3, 4], "float32"]]),
}


@pytest.mark.parametrize("name", list(CONSTRUCTS))
def test_counts_every_construct(submission, name):
    what, source, specs = CONSTRUCTS[name]
    counts = expect_mapping(submission.probe("ex06_jaxpr:count_in_source", source, "f", specs))
    closed = trace(source, "f", specs)
    problem = count_problem(counts, closed)
    if problem is None:
        return
    direction, mistakes = problem
    truth = ir.primitive_counts(closed)
    diff = {k: (counts.get(k, 0), truth.get(k, 0)) for k in sorted(set(counts) | set(truth))
            if counts.get(k, 0) != truth.get(k, 0)}
    raise CheckFailed(
        f"count_primitives is wrong around {what} ({direction})",
        measured=f"on CONSTRUCTS[{name!r}] in test_public.py:\n{source.strip()}\n"
                 "yours vs the jaxpr's: " + ", ".join(f"{k}: {a} vs {b}" for k, (a, b) in diff.items()),
        expected=str(dict(sorted(truth.items()))),
        hint=(("your counts look like this mistake: " if len(mistakes) == 1 else "your counts look like one of these "
               "mistakes: ") + " -- OR -- ".join(mistakes)) if mistakes else
             GENERIC_ADVICE + "; print jax.make_jaxpr(f)(...) of this function to see where",
    )


def learner_answers(submission):
    got = submission.probe("ex06_jaxpr:answers")
    return got["answers"]


KEYS = {
    "where_selects_with": str, "nested_call_primitive": str, "relu_primitive": str,
    "layer_top_level_eqns": int, "mixed_output_dtypes": list, "branchy_cond_count": int, "scan_body_eqns": int,
}


def test_answers_are_well_formed(submission):
    got = learner_answers(submission)
    if not isinstance(got, dict):
        raise CheckFailed("answers() should return a dict", measured=type(got).__name__, expected="dict",
                          hint="return {'where_selects_with': ..., ...} with the keys the stub lists")
    missing, extra = sorted(set(KEYS) - set(got)), sorted(set(got) - set(KEYS))
    if missing or extra:
        raise CheckFailed("answers() has the wrong keys", measured=f"missing {missing}, unexpected {extra}",
                          expected=str(sorted(KEYS)), hint="use exactly the keys listed in the docstring of answers()")
    for key, typ in KEYS.items():
        value = got[key]
        ok = isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value) if typ is list \
            else type(value) is typ
        if not ok:
            raise CheckFailed(f"answers()[{key!r}] has the wrong type", measured=type(value).__name__,
                              expected="a list of str" if typ is list else typ.__name__,
                              hint="names are strings such as 'add'; counts are ints")


def test_reads_nested_call_and_relu(submission):
    got = learner_answers(submission)
    if not isinstance(got, dict):
        raise CheckFailed("answers() should return a dict", measured=type(got).__name__, expected="dict")
    x = jax.ShapeDtypeStruct((4,), jnp.float32)

    @jax.jit
    def _double(v):
        return 2.0 * v

    truth = {
        "nested_call_primitive": first_holder(jax.make_jaxpr(lambda v: _double(v) + 1.0)(x).jaxpr).primitive.name,
        "relu_primitive": jax.make_jaxpr(jax.nn.relu)(x).jaxpr.eqns[0].primitive.name,
    }
    for key, right in truth.items():
        answer = got.get(key)
        if (answer.strip() if isinstance(answer, str) else answer) != right:
            raise CheckFailed(f"answers()[{key!r}] is not what this JAX's jaxpr shows",
                              measured=repr(got.get(key)), expected=repr(right),
                              hint="print jax.make_jaxpr(calls_helper)(jnp.ones(4)) and "
                                   "jax.make_jaxpr(activation)(jnp.ones(4)); names change between JAX versions")
