# verdict: wrong
# strategy: part B: old tutorial answer
# breaks: Part B: "they are judged against the jaxprs of the JAX installed where you are graded, so answers copied from an older tutorial will not do"
# idea: nested call answered 'pjit'
# should-fail: reading_answers
"""Exercise 6 submission (wrong_b_pjit_from_tutorial), written from the statement alone."""

import collections
from collections import Counter, deque

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend import core as jcore


def _walk(jaxpr, counts):
    for eqn in jaxpr.eqns:
        counts[eqn.primitive.name] += 1
        for sub in jcore.jaxprs_in_params(eqn.params):
            _walk(sub, counts)


def count_primitives(closed_jaxpr):
    counts = Counter()
    _walk(closed_jaxpr.jaxpr, counts)
    return dict(counts)


def answers():
    # read off the printed jaxprs of JAX 0.10.2
    return {
        "where_selects_with": "select_n",
        "nested_call_primitive": "pjit",
        "relu_primitive": "custom_jvp_call",
        "layer_top_level_eqns": 8,
        "mixed_output_dtypes": ["int32", "float32", "float32", "float32", "bool", "int32", "int32"],
        "branchy_cond_count": 1,
        "scan_body_eqns": 3,
    }


def example_mlp(x, w1, w2):
    h = jax.nn.relu(x @ w1)
    return jnp.tanh(h @ w2)


def example_scan(xs):
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
    return lax.cond(jnp.sum(x) > 0, _unit, lambda v: jnp.where(v > 0, v, 0.0), x)


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
