# verdict: right
# strategy: recursive walk, isinstance on params / answers computed live
# idea: own param digging for ClosedJaxpr, Jaxpr, tuples; answers from make_jaxpr
"""Exercise 6 submission (right_recursive_isinstance__computed), written from the statement alone."""

import collections
from collections import Counter, deque

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend import core as jcore


def _subs(value):
    """Every Jaxpr reachable from one parameter value (ClosedJaxpr, Jaxpr, or sequences)."""
    if isinstance(value, jcore.ClosedJaxpr):
        yield value.jaxpr
    elif isinstance(value, jcore.Jaxpr):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _subs(v)


def count_primitives(closed_jaxpr):
    counts = {}

    def visit(jaxpr):
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            counts[name] = counts.get(name, 0) + 1
            for value in eqn.params.values():
                for sub in _subs(value):
                    visit(sub)

    visit(closed_jaxpr.jaxpr)
    return counts


def _sub_jaxprs(eqn):
    return list(jcore.jaxprs_in_params(eqn.params))


def answers():
    """Computed from live jaxprs, so they follow whatever JAX is installed."""
    f4 = jnp.ones(4, jnp.float32)
    cj = jax.make_jaxpr(clip_negative)(f4)
    where_eqn = [e for e in cj.jaxpr.eqns if _sub_jaxprs(e)][-1]
    inner = _sub_jaxprs(where_eqn)[0]
    out_var = inner.outvars[0]
    selects = next(e.primitive.name for e in inner.eqns if out_var in e.outvars)

    nested = jax.make_jaxpr(calls_helper)(f4).jaxpr.eqns[0].primitive.name
    relu = jax.make_jaxpr(activation)(f4).jaxpr.eqns[0].primitive.name
    lay = len(jax.make_jaxpr(layer)(jnp.ones((4, 3)), jnp.ones((3, 5)), jnp.ones(5)).jaxpr.eqns)
    mixed = jax.make_jaxpr(mixed_types)(jnp.ones(3, jnp.int32), jnp.ones(3, jnp.float32))
    dtypes = [str(v.aval.dtype) for v in mixed.jaxpr.outvars]
    counts = count_primitives(jax.make_jaxpr(branchy, static_argnums=1)(f4, True))
    rt = jax.make_jaxpr(running_total)(jnp.ones(5, jnp.float32))
    scan_eqn = next(e for e in rt.jaxpr.eqns if e.primitive.name == "scan")
    return {
        "where_selects_with": selects,
        "nested_call_primitive": nested,
        "relu_primitive": relu,
        "layer_top_level_eqns": int(lay),
        "mixed_output_dtypes": dtypes,
        "branchy_cond_count": int(counts.get("cond", 0)),
        "scan_body_eqns": len(scan_eqn.params["jaxpr"].jaxpr.eqns),
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
