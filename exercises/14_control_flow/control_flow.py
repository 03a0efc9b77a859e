"""Exercise 14: control flow under jit.

Read README.md in this folder first.  Fill in every TODO; keep the names and signatures, and
keep the given functions as they are.  Check your work with:  grade exercise 14
"""

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

def apply_branch(index, x):
    """BRANCHES[index](x) with lax.switch: index is a traced int (out of range: clamped).

    TODO: jit it; all indices must share one compiled program, and only the chosen branch runs.
    """
    raise NotImplementedError("TODO: apply_branch")


# --- Part B -----------------------------------------------------------------------------------------

def piecewise(x):
    """broken_piecewise fixed: positive_branch(x) when sum(x) > 0, else negative_branch(x), with
    lax.cond; jax.grad(piecewise) must be finite for both signs.

    TODO: jit it (both signs share one compiled program).
    """
    raise NotImplementedError("TODO: piecewise")


# --- Part C -----------------------------------------------------------------------------------------

def safe_sqrt(x):
    """Elementwise: sqrt(x) where x > 0, exactly 0 where x <= 0; its gradient is finite everywhere
    (0 where x <= 0).

    TODO
    """
    raise NotImplementedError("TODO: safe_sqrt")


# --- Part D -----------------------------------------------------------------------------------------

def answers():
    """Your answers, found by running code on the JAX you have:

    "cond_branches_traced": int  -- a jitted function calls lax.cond(pred, f, g, x) once: how many
                                    of f and g run (in Python, while it is traced)?
    "switch_index_minus_1": int  -- lax.switch(-1, (b0, b1, b2), x) runs which branch (0, 1 or 2)?
    "switch_index_5": int        -- and lax.switch(5, (b0, b1, b2), x)?
    "jit_if_error": str          -- the class name (type(err).__name__) of the error that calling
                                    broken_piecewise raises
    "grad_if_raises": bool       -- does jax.grad (no jit) of the undecorated body of
                                    broken_piecewise raise?
    "where_grad_finite": bool    -- is jax.grad of jnp.where(jnp.sum(x) > 0, positive_branch(x),
                                    negative_branch(x)) finite at an x whose sum is positive?

    TODO
    """
    raise NotImplementedError("TODO: answers")


if __name__ == "__main__":
    # A small demo (not graded).
    x = jnp.array([0.5, 1.0, -0.25])
    print("apply_branch:", [apply_branch(i, x) for i in (-1, 0, 1, 2, 5)])
    print("piecewise:", piecewise(x), piecewise(-x))
    print("grad:", jax.grad(piecewise)(x), jax.grad(piecewise)(-x))
    print("safe_sqrt:", safe_sqrt(jnp.array([-1.0, 0.0, 4.0])),
          jax.grad(lambda v: jnp.sum(safe_sqrt(v)))(jnp.array([-1.0, 0.0, 4.0])))
    print("answers:", answers())
