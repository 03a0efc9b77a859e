"""Reference solution for exercise 6 (reading a jaxpr)."""

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend.core import ClosedJaxpr, Jaxpr


# ---------------------------------------------------------------------------------
# Part A: count every primitive, nested ones included
# ---------------------------------------------------------------------------------

def _sub_jaxprs(params):
    """Every sub-jaxpr held in an equation's params: bare `Jaxpr`s (checkpoint keeps one),
    `ClosedJaxpr`s (jit, scan, while, custom_jvp_call...), and tuples or lists of them
    (the branches of a cond)."""
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, Jaxpr):
                yield item


def count_primitives(closed_jaxpr):
    """How many times each primitive occurs, sub-jaxprs included (one count per place)."""
    counts = {}
    stack = [getattr(closed_jaxpr, "jaxpr", closed_jaxpr)]
    while stack:
        jaxpr = stack.pop()
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            counts[name] = counts.get(name, 0) + 1
            # No "seen" set on purpose: a helper called twice is two places to count.
            stack.extend(_sub_jaxprs(eqn.params))
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


def _outer(fn, *args, **kwargs):
    return jax.make_jaxpr(fn, **kwargs)(*args).jaxpr


def _producer(jaxpr, var):
    """The equation whose outputs include `var`."""
    return next(e for e in jaxpr.eqns if any(o is var for o in e.outvars))


def answers():
    """Computed from the live jaxprs, so they follow the installed JAX.  (Reading the
    printed jaxprs and typing the values in is just as good.)"""
    f32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)  # noqa: E731
    i32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.int32)  # noqa: E731

    clip = _outer(clip_negative, f32(4))
    inner = next(_sub_jaxprs(_producer(clip, clip.outvars[0]).params))  # the nested call's jaxpr
    helper_call = next(e for e in _outer(calls_helper, f32(4)).eqns if any(True for _ in _sub_jaxprs(e.params)))
    scan_eqn = next(e for e in _outer(running_total, f32(5)).eqns if e.primitive.name == "scan")
    branchy_closed = jax.make_jaxpr(branchy, static_argnums=1)(f32(4), True)
    return {
        "where_selects_with": _producer(inner, inner.outvars[0]).primitive.name,
        "nested_call_primitive": helper_call.primitive.name,
        "relu_primitive": _outer(activation, f32(4)).eqns[0].primitive.name,
        "layer_top_level_eqns": len(_outer(layer, f32(4, 3), f32(3, 5), f32(5)).eqns),
        "mixed_output_dtypes": [str(v.aval.dtype) for v in _outer(mixed_types, i32(3), f32(3)).outvars],
        "branchy_cond_count": count_primitives(branchy_closed).get("cond", 0),
        "scan_body_eqns": len(next(_sub_jaxprs(scan_eqn.params)).eqns),
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
