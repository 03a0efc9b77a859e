"""Exercise 14 in another idiom: an int32 index, partial jit, a custom_jvp square root."""

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
from functools import partial


@partial(jax.jit)
def apply_branch(index, x):
    return lax.switch(jnp.asarray(index, jnp.int32), [scale, wave, square], x)


@partial(jax.jit, static_argnums=())
def piecewise(x):
    return lax.cond(jnp.greater(jnp.sum(x), 0.0), positive_branch, negative_branch, x)


@jax.custom_jvp
def safe_sqrt(x):
    return jnp.where(x > 0, jnp.sqrt(jnp.where(x > 0, x, 1.0)), 0.0)


@safe_sqrt.defjvp
def _safe_sqrt_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    slope = jnp.where(x > 0, 0.5 / jnp.sqrt(jnp.where(x > 0, x, 1.0)), 0.0)
    return safe_sqrt(x), slope * t


ANSWERS = {"cond_branches_traced": 2, "switch_index_minus_1": 0, "switch_index_5": 2,
           "jit_if_error": "TracerBoolConversionError", "grad_if_raises": False, "where_grad_finite": False}


def answers():
    return dict(ANSWERS)
