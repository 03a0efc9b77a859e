"""Exercise 14: control flow under jit (reference solution)."""

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


# --- Part A -----------------------------------------------------------------------------------------

@jax.jit
def apply_branch(index, x):
    return lax.switch(index, BRANCHES, x)


# --- Part B -----------------------------------------------------------------------------------------

@jax.jit
def piecewise(x):
    return lax.cond(jnp.sum(x) > 0, positive_branch, negative_branch, x)


# --- Part C -----------------------------------------------------------------------------------------

def safe_sqrt(x):
    positive = x > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, x, 1.0)), 0.0)


# --- Part D -----------------------------------------------------------------------------------------

def _answers_measured():
    """How the answers below were found (run `python control_flow.py`)."""
    traced = []

    def f(v):
        traced.append("f")
        return v + 1.0

    def g(v):
        traced.append("g")
        return v - 1.0

    jax.jit(lambda v: lax.cond(jnp.sum(v) > 0, f, g, v))(jnp.ones(3))
    branches = (lambda v: v * 0.0, lambda v: v * 0.0 + 1.0, lambda v: v * 0.0 + 2.0)
    try:
        broken_piecewise(jnp.ones(3))
        error = ""
    except Exception as exc:  # noqa: BLE001
        error = type(exc).__name__
    try:
        jax.grad(broken_piecewise.__wrapped__)(jnp.ones(3))
        grad_raises = False
    except Exception:  # noqa: BLE001
        grad_raises = True
    positive = jnp.array([0.5, 1.0, -0.25])
    where = jax.grad(lambda v: jnp.where(jnp.sum(v) > 0, positive_branch(v), negative_branch(v)))(positive)
    return {"cond_branches_traced": len(set(traced)),
            "switch_index_minus_1": int(lax.switch(-1, branches, 0.0)),
            "switch_index_5": int(lax.switch(5, branches, 0.0)),
            "jit_if_error": error, "grad_if_raises": grad_raises,
            "where_grad_finite": bool(jnp.all(jnp.isfinite(where)))}


def answers():
    return {"cond_branches_traced": 2, "switch_index_minus_1": 0, "switch_index_5": 2,
            "jit_if_error": "TracerBoolConversionError", "grad_if_raises": False, "where_grad_finite": False}


if __name__ == "__main__":
    x = jnp.array([0.5, 1.0, -0.25])
    print("apply_branch:", [apply_branch(i, x) for i in (-1, 0, 1, 2, 5)])
    print("piecewise:", piecewise(x), piecewise(-x))
    print("grad:", jax.grad(piecewise)(x), jax.grad(piecewise)(-x))
    print("safe_sqrt:", safe_sqrt(jnp.array([-1.0, 0.0, 4.0])),
          jax.grad(lambda v: jnp.sum(safe_sqrt(v)))(jnp.array([-1.0, 0.0, 4.0])))
    print("answers measured:", _answers_measured())
    print("answers given:   ", answers())
