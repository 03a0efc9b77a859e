"""Exercise 6 in another idiom: a recursive walk with collections.Counter and jax.extend.core.jaxprs_in_params; the answers computed live.

Exercise 6: reading a jaxpr.

Read README.md in this folder first.  Two TODOs: `count_primitives` (part A) and
`answers` (part B).  Keep every name and signature; do not change the functions the
questions are about.  Check your work with:  grade exercise 6

Try things out with:  python jaxpr_reading.py   (prints the jaxprs of the examples)
"""

import jax
import jax.numpy as jnp
from jax import lax
from collections import Counter

from jax.extend.core import jaxprs_in_params


# ---------------------------------------------------------------------------------
# Part A: count every primitive, nested ones included
# ---------------------------------------------------------------------------------

def count_primitives(closed_jaxpr):
    """Recursion: each equation once, then every sub-jaxpr it holds, wherever it sits."""
    def walk(jaxpr):
        counts = Counter(eqn.primitive.name for eqn in jaxpr.eqns)
        for eqn in jaxpr.eqns:
            for sub in jaxprs_in_params(eqn.params):
                counts += walk(getattr(sub, "jaxpr", sub))
        return counts

    return dict(walk(closed_jaxpr.jaxpr))

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
    """Every answer read from a jaxpr traced here, with this JAX."""
    f32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)  # noqa: E731

    def outer(fn, *args, **kw):
        return jax.make_jaxpr(fn, **kw)(*args).jaxpr

    def holders(jaxpr):
        return [e for e in jaxpr.eqns if list(jaxprs_in_params(e.params))]

    clip = outer(clip_negative, f32(4))
    where_call = holders(clip)[0]
    inner = list(jaxprs_in_params(where_call.params))[0]
    inner = getattr(inner, "jaxpr", inner)
    producer = [e for e in inner.eqns if inner.outvars[0] in e.outvars][0]
    cond_name = holders(outer(lambda v: lax.cond(v[0] > 0, jnp.sin, jnp.cos, v), f32(3)))[0].primitive.name
    scan_eqn = holders(outer(running_total, f32(5)))[0]
    body = list(jaxprs_in_params(scan_eqn.params))[0]
    return {
        "where_selects_with": producer.primitive.name,
        "nested_call_primitive": holders(outer(calls_helper, f32(4)))[0].primitive.name,
        "relu_primitive": outer(activation, f32(4)).eqns[0].primitive.name,
        "layer_top_level_eqns": len(outer(layer, f32(4, 3), f32(3, 5), f32(5)).eqns),
        "mixed_output_dtypes": [v.aval.dtype.name for v in
                                outer(mixed_types, jax.ShapeDtypeStruct((3,), jnp.int32), f32(3)).outvars],
        "branchy_cond_count": count_primitives(jax.make_jaxpr(branchy, static_argnums=1)(f32(4), True)).get(cond_name, 0),
        "scan_body_eqns": len(getattr(body, "jaxpr", body).eqns),
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
