"""Exercise 6 in another idiom: an explicit stack and isinstance checks on ClosedJaxpr / Jaxpr and the containers that hold them; the answers typed in from the printed jaxprs.

Exercise 6: reading a jaxpr.

Read README.md in this folder first.  Two TODOs: `count_primitives` (part A) and
`answers` (part B).  Keep every name and signature; do not change the functions the
questions are about.  Check your work with:  grade exercise 6

Try things out with:  python jaxpr_reading.py   (prints the jaxprs of the examples)
"""

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend.core import ClosedJaxpr, Jaxpr


# ---------------------------------------------------------------------------------
# Part A: count every primitive, nested ones included
# ---------------------------------------------------------------------------------

def _jaxprs_in(value):
    """The jaxprs a parameter value holds: itself, or inside tuples, lists and dicts."""
    if isinstance(value, ClosedJaxpr):
        return [value.jaxpr]
    if isinstance(value, Jaxpr):
        return [value]
    if isinstance(value, (tuple, list)):
        return [j for item in value for j in _jaxprs_in(item)]
    if isinstance(value, dict):
        return [j for item in value.values() for j in _jaxprs_in(item)]
    return []


def count_primitives(closed_jaxpr):
    counts = {}
    todo = [closed_jaxpr.jaxpr]
    while todo:
        for eqn in todo.pop().eqns:
            counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1
            for value in eqn.params.values():
                todo.extend(_jaxprs_in(value))
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
    """Read off the jaxprs printed with this JAX (python jaxpr_reading.py, and make_jaxpr of each)."""
    return {
        "where_selects_with": "select_n",
        "nested_call_primitive": "jit",
        "relu_primitive": "custom_jvp_call",
        "layer_top_level_eqns": 8,
        "mixed_output_dtypes": ["int32", "float32", "float32", "float32", "bool", "int32", "int32"],
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
