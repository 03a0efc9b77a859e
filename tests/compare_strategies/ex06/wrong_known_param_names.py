# verdict: wrong
# strategy: part A: hard-coded param names
# breaks: Part A: "every equation of every sub-jaxpr, at any depth (the `jit` inside the `custom_jvp_call` ...)"
# idea: follows a fixed list of param names that misses call_jaxpr
# should-fail: counts_nested_primitives, counts_inside_every_construct
"""Exercise 6 submission (wrong_known_param_names), written from the statement alone."""

import collections
from collections import Counter, deque

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend import core as jcore


_SUB_PARAMS = ("jaxpr", "branches", "body_jaxpr", "cond_jaxpr")   # custom_* call_jaxpr forgotten


def count_primitives(closed_jaxpr):
    counts = Counter()

    def walk(j):
        for eqn in j.eqns:
            counts[eqn.primitive.name] += 1
            for name in _SUB_PARAMS:
                v = eqn.params.get(name)
                for s in (v if isinstance(v, tuple) else (v,)):
                    if s is not None:
                        walk(s.jaxpr if isinstance(s, jcore.ClosedJaxpr) else s)

    walk(closed_jaxpr.jaxpr)
    return dict(counts)


def answers():
    # read off the printed jaxprs of JAX 0.10.2
    return {
        "where_selects_with": "select_n",
        "nested_call_primitive": "jit",
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
