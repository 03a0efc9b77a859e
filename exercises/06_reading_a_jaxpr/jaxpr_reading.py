"""Exercise 6: reading a jaxpr.

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

def count_primitives(closed_jaxpr):
    """How many times each primitive occurs in `closed_jaxpr` (what jax.make_jaxpr returns).

    Returns a plain dict {primitive name (str): count (int)}, e.g. {"sin": 2, "jit": 1, ...},
    holding only primitives that occur.  Count EVERY equation, including:
      * the equations inside sub-jaxprs (a nested `jit`, the body of a `scan` or `while`,
        every branch of a `cond`, the function inside `custom_jvp_call`, `checkpoint`, ...),
        however deep they are nested, and
      * the higher-order equation itself (a `scan` equation counts once as "scan", and its
        body's equations count too).
    A sub-jaxpr that appears in several places (one jitted helper called twice, a `cond`
    whose two branches are the same function) is counted once per place it appears.

    TODO: walk `closed_jaxpr.jaxpr.eqns`; the name of an equation's primitive is
    `eqn.primitive.name`; its sub-jaxprs sit in `eqn.params`.
    """
    raise NotImplementedError("TODO: count_primitives")


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
    """Your answers to the reading questions, as a dict with exactly these keys.

    Read the jaxprs (print them!) of the functions above, traced on the shapes their
    docstrings give, with the JAX installed here.

    "where_selects_with"   (str)  clip_negative: jnp.where becomes a nested call; which
                                  primitive inside it produces the call's result?
    "nested_call_primitive" (str) calls_helper: the name of the primitive of the
                                  equation that calls the jitted `_double`.
    "relu_primitive"       (str)  activation: the primitive of its one top-level equation.
    "layer_top_level_eqns" (int)  layer: how many equations the OUTER jaxpr has (an
                                  equation holding a sub-jaxpr counts as one).
    "mixed_output_dtypes"  (list of str; a tuple will do) mixed_types: the dtype of each of the seven
                                  outputs in order, as NumPy names ("int32", "float32", "bool").
    "branchy_cond_count"   (int)  branchy with use_sin=True: how many `cond` equations,
                                  nested ones included?
    "scan_body_eqns"       (int)  running_total: how many equations the scan's body has.

    TODO: replace the raise with `return {...}`.  You may hard-code the values you read or
    compute them here with jax.make_jaxpr -- either way they must match what this JAX shows.
    """
    raise NotImplementedError("TODO: answers")


if __name__ == "__main__":
    print(jax.make_jaxpr(example_mlp)(jnp.ones((4, 3)), jnp.ones((3, 8)), jnp.ones((8, 2))))
    print(jax.make_jaxpr(example_scan)(jnp.ones((6, 3))))
    print(jax.make_jaxpr(example_branch)(jnp.ones(5)))
    print(jax.make_jaxpr(branchy, static_argnums=1)(jnp.ones(4), True))
    try:
        print(count_primitives(jax.make_jaxpr(example_branch)(jnp.ones(5))))
    except NotImplementedError as exc:
        print("count_primitives:", exc)
