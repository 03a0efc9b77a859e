"""Exercise 6 in another idiom: a generator that finds sub-jaxprs by duck typing (anything with .eqns, or a .jaxpr that has them); some answers typed in, some computed.

Exercise 6: reading a jaxpr.

Read README.md in this folder first.  Two TODOs: `count_primitives` (part A) and
`answers` (part B).  Keep every name and signature; do not change the functions the
questions are about.  Check your work with:  grade exercise 6

Try things out with:  python jaxpr_reading.py   (prints the jaxprs of the examples)
"""

import jax
import jax.numpy as jnp
from jax import lax


# ---------------------------------------------------------------------------------
# Part A: count every primitive, nested ones included
# ---------------------------------------------------------------------------------

def _sub_jaxprs(value):
    if hasattr(value, "eqns"):  # a bare Jaxpr (remat2 holds one)
        yield value
    elif hasattr(getattr(value, "jaxpr", None), "eqns"):  # a ClosedJaxpr
        yield value.jaxpr
    elif isinstance(value, (tuple, list)):  # cond's branches: one per case
        for item in value:
            yield from _sub_jaxprs(item)


def _equations(jaxpr):
    for eqn in jaxpr.eqns:
        yield eqn
        for value in eqn.params.values():
            for sub in _sub_jaxprs(value):
                yield from _equations(sub)


def count_primitives(closed_jaxpr):
    counts = {}
    for eqn in _equations(closed_jaxpr.jaxpr):
        counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1
    return counts

# The three functions the public checks count (do not change them).  Trace them with e.g.
#   jax.make_jaxpr(example_mlp)(jnp.ones((4, 3)), jnp.ones((3, 8)), jnp.ones((8, 2)))

def example_mlp(x, w1, w2):
    """x: f32[4, 3], w1: f32[3, 8], w2: f32[8, 2]."""
    h = jax.nn.relu(x @ w1)
    return jnp.tanh(h @ w2)


def example_scan(xs):
    """xs: f32[6, 3]: a running sum and a running maximum over the rows, with lax.scan."""
    def step(carry, row):
        total, biggest = carry
        return (total + row, jnp.maximum(biggest, row)), jnp.sum(row)

    start = (jnp.zeros(3), jnp.full(3, -jnp.inf))
    (total, biggest), row_sums = lax.scan(step, start, xs)
    return total, biggest, row_sums


@jax.jit
def _unit(v):
    return v / jnp.sqrt(jnp.sum(v * v))


def example_branch(x):
    """x: f32[5]."""
    return lax.cond(jnp.sum(x) > 0, _unit, lambda v: jnp.where(v > 0, v, 0.0), x)


# ---------------------------------------------------------------------------------
# Part B: read jaxprs.  The questions are about these functions (do not change them).
# ---------------------------------------------------------------------------------

def clip_negative(x):
    """x: f32[4]."""
    return jnp.where(x > 0, x, 0.0)


@jax.jit
def _double(x):
    return 2.0 * x


def calls_helper(x):
    """x: f32[4]."""
    return _double(x) + 1.0


def activation(x):
    """x: f32[4]."""
    return jax.nn.relu(x)


def layer(x, w, b):
    """x: f32[4, 3], w: f32[3, 5], b: f32[5]."""
    h = x @ w + b
    for _ in range(2):
        h = jnp.tanh(h)
    return jnp.where(h > 0, h, 0.1 * h)


def mixed_types(i, x):
    """i: i32[3], x: f32[3]  (seven outputs)."""
    return i * 2, i / 2, i + x, i * 2.0, x > 1, jnp.sum(i), i // 2


def branchy(x, use_sin):
    """x: f32[4]; use_sin is a static Python bool: trace with
    jax.make_jaxpr(branchy, static_argnums=1)(x, True)."""
    if use_sin:
        x = jnp.sin(x)
    x = lax.cond(jnp.sum(x) > 0, lambda v: v * 2.0, lambda v: -v, x)
    return jnp.where(x > 1.0, x, 1.0)


def running_total(xs):
    """xs: f32[5]."""
    def step(total, x):
        total = total + x * x
        return total, total

    return lax.scan(step, 0.0, xs)


def answers():
    f32 = jax.ShapeDtypeStruct((4,), jnp.float32)
    calls = [e for e in jax.make_jaxpr(calls_helper)(f32).jaxpr.eqns if any(True for v in e.params.values()
                                                                            for _ in _sub_jaxprs(v))]
    dtypes = jax.eval_shape(mixed_types, jax.ShapeDtypeStruct((3,), jnp.int32), jax.ShapeDtypeStruct((3,), jnp.float32))
    return {
        "where_selects_with": "select_n",  # select_n(pred, value_if_false, value_if_true)
        "nested_call_primitive": calls[0].primitive.name,
        "relu_primitive": "custom_jvp_call",
        "layer_top_level_eqns": 8,
        "mixed_output_dtypes": [str(d.dtype) for d in dtypes],
        "branchy_cond_count": 1,
        "scan_body_eqns": 3,
    }

if __name__ == "__main__":
    print(jax.make_jaxpr(example_mlp)(jnp.ones((4, 3)), jnp.ones((3, 8)), jnp.ones((8, 2))))
    print(jax.make_jaxpr(example_scan)(jnp.ones((6, 3))))
    print(jax.make_jaxpr(example_branch)(jnp.ones(5)))
    print(jax.make_jaxpr(branchy, static_argnums=1)(jnp.ones(4), True))
    try:
        print(count_primitives(jax.make_jaxpr(example_branch)(jnp.ones(5))))
    except NotImplementedError as exc:
        print("count_primitives:", exc)
