"""Exercise 13: pure functions and pytrees.

Read README.md in this folder first.  Fill in every TODO; keep the names and signatures, and
keep ACTIVATIONS, LEARNING_RATE, loss and impure_step as they are.  Check your work with:
grade exercise 13
"""

import dataclasses  # noqa: F401 - for Dense

import jax
import jax.numpy as jnp
import numpy as np  # noqa: F401

ACTIVATIONS = {"tanh": jnp.tanh, "relu": jax.nn.relu, "sigmoid": jax.nn.sigmoid}
LEARNING_RATE = 0.1
steps_taken = 0


def loss(w, x, y):
    """Least squares (given; do not change): w f32[d], x f32[B, d], y f32[B] -> f32[]."""
    return 0.5 * jnp.mean((x @ w - y) ** 2)


@jax.jit
def impure_step(w, x, y):
    """One gradient step, impure on purpose (given; not graded): it bumps a global counter and
    reads a global learning rate.  Do not fix it here: write pure_step below."""
    global steps_taken
    steps_taken += 1
    return w - LEARNING_RATE * jax.grad(loss)(w, x, y)


# --- Part A: functions of any pytree ------------------------------------------------------------

def tree_shapes(tree):
    """The same tree with every leaf replaced by its shape (a tuple of Python ints).

    TODO
    """
    raise NotImplementedError("TODO: tree_shapes")


def global_norm(tree):
    """sqrt(sum over every leaf of sum(leaf ** 2)), a 0-d float32 array; must trace under jax.jit.

    TODO
    """
    raise NotImplementedError("TODO: global_norm")


def ravel(tree):
    """-> (vec, unravel): vec is every leaf raveled and concatenated in jax.tree.leaves order
    (f32[n]); unravel(v) rebuilds a tree of the same structure from any f32[n] (traceable).

    TODO: use jax.tree.flatten and jax.tree.unflatten
    """
    raise NotImplementedError("TODO: ravel")


# --- Part B: a layer that is a pytree -------------------------------------------------------------

class Dense:
    """TODO: a dataclass registered with @jax.tree_util.register_dataclass, fields in this order:
    w (f32[d_in, d_out]), b (f32[d_out]) and a static activation (a key of ACTIVATIONS).
    The grader builds it as Dense(w=..., b=..., activation=...)."""

    def __init__(self, w, b, activation):
        raise NotImplementedError("TODO: Dense")


def apply(layer, x):
    """ACTIVATIONS[layer.activation](x @ layer.w + layer.b), x: f32[B, d_in] -> f32[B, d_out].

    TODO: jit it, so that new values never compile again and a new activation compiles once.
    """
    raise NotImplementedError("TODO: apply")


# --- Part C: a pure step --------------------------------------------------------------------------

def pure_step(w, count, x, y, lr):
    """impure_step made pure: -> (w - lr * grad of loss at (w, x, y), count + 1).

    count is an int32 0-d array; lr is a Python float that changes from call to call.
    TODO: jit it, and read or write no global variable.
    """
    raise NotImplementedError("TODO: pure_step")


if __name__ == "__main__":
    # A small demo (not graded).
    params = {"a": jnp.zeros((3,)), "b": [jnp.ones((2, 2)), jnp.ones((2,))]}
    print("tree_shapes:", tree_shapes(params))
    print("global_norm:", global_norm(params))
    vec, unravel = ravel(params)
    print("ravel:", vec.shape, "-> unravel(2 * vec):", unravel(2 * vec))
    layer = Dense(w=jnp.ones((3, 2)) * 0.1, b=jnp.zeros(2), activation="tanh")
    print("Dense leaves:", len(jax.tree.leaves(layer)), "grad type:",
          type(jax.grad(lambda lyr: jnp.sum(apply(lyr, jnp.ones((4, 3)))))(layer)).__name__)
    w, x, y = jnp.zeros(3), jnp.ones((4, 3)), jnp.ones(4)
    for _ in range(3):
        impure_step(w, x, y)
    print("impure_step called 3 times; steps_taken =", steps_taken)
    count = jnp.int32(0)
    for lr in (0.1, 0.05, 0.02):
        w, count = pure_step(w, count, x, y, lr)
    print("pure_step called 3 times; count =", int(count), "w =", w)
