"""Exercise 14 in another idiom: a clipped switch, cond on lambdas, sqrt of relu, answers measured at call time."""

import jax
import jax.numpy as jnp
from jax import lax  # noqa: F401
import numpy as np  # noqa: F401


def scale(x):
    return 2.0 * x


def wave(x):
    return jnp.sin(x)


def square(x):
    return x * x


BRANCHES = (scale, wave, square)  # given: apply_branch chooses one of these


def positive_branch(x):
    """Given: used when sum(x) > 0."""
    return jnp.sum(jnp.sin(x) * x)


def negative_branch(x):
    """Given: used when sum(x) <= 0 (a square root of -sum(x): NaN when the sum is positive)."""
    return jnp.sqrt(-jnp.sum(x))


@jax.jit
def broken_piecewise(x):
    """Given, broken on purpose (not graded): a Python `if` on a traced value.  Fix it in piecewise."""
    if x.sum() > 0:
        return positive_branch(x)
    return negative_branch(x)


@jax.jit
def apply_branch(index, x):
    return lax.switch(jnp.clip(index, 0, len(BRANCHES) - 1), BRANCHES, x)


@jax.jit
def piecewise(x):
    return lax.cond(x.sum() > 0, lambda v: positive_branch(v), lambda v: negative_branch(v), x)


def safe_sqrt(x):
    return jnp.sqrt(jax.nn.relu(x))  # relu's own derivative is a select: 0 for x <= 0, never 0 * inf


def answers():
    seen = set()

    def mark(name, value):
        seen.add(name)
        return value

    jax.jit(lambda v: lax.cond(v > 0, lambda u: mark("t", u), lambda u: mark("f", -u), v))(1.0)
    pick = jax.jit(lambda i: lax.switch(i, [lambda: 0, lambda: 1, lambda: 2]))
    try:
        broken_piecewise(jnp.ones(2))
        error = None
    except Exception as err:  # noqa: BLE001
        error = type(err).__name__
    try:
        jax.grad(broken_piecewise.__wrapped__)(jnp.ones(2))
        raises = False
    except Exception:  # noqa: BLE001
        raises = True
    g = jax.grad(lambda v: jnp.where(jnp.sum(v) > 0, positive_branch(v), negative_branch(v)))(jnp.ones(2))
    return {"cond_branches_traced": len(seen), "switch_index_minus_1": int(pick(-1)), "switch_index_5": int(pick(5)),
            "jit_if_error": error, "grad_if_raises": raises, "where_grad_finite": bool(jnp.isfinite(g).all())}
