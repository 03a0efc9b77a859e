"""Exercise 15: PRNG discipline.

Read README.md in this folder first.  Fill in every TODO; keep the names and signatures, and
keep the given functions as they are.  Check your work with:  grade exercise 15
"""

import jax
import jax.numpy as jnp
import numpy as np  # noqa: F401


def forward(params, x, keep, rate):
    """Given (do not change): a two-layer MLP with inverted dropout on its hidden layer.

    params = [{"w": f32[d, H], "b": f32[H]}, {"w": f32[H, o], "b": f32[o]}]; keep: bool[B, H].
    """
    h = jnp.tanh(x @ params[0]["w"] + params[0]["b"])
    h = jnp.where(keep, h / (1.0 - rate), 0.0)
    return h @ params[1]["w"] + params[1]["b"]


def loss(params, x, y, keep, rate):
    """Given (do not change): mean squared error of forward."""
    return jnp.mean((forward(params, x, keep, rate) - y) ** 2)


@jax.jit
def sgd_step(params, x, y, keep, rate, lr):
    """Given (do not change): one SGD step on loss with the dropout mask `keep`."""
    grads = jax.grad(loss)(params, x, y, keep, rate)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


# --- Part A -----------------------------------------------------------------------------------------

def init_mlp(key, sizes):
    """One layer per pair of consecutive sizes (m, n): {"w": normal(layer_key, (m, n)) / sqrt(m),
    "b": zeros(n)}, every layer drawn from a key of its own, derived from `key`.

    TODO
    """
    raise NotImplementedError("TODO: init_mlp")


# --- Part B -----------------------------------------------------------------------------------------

def dropout(key, x, rate, training):
    """Inverted dropout: where jax.random.bernoulli(key, 1 - rate, x.shape) keeps a unit,
    x / (1 - rate), else 0; x itself when not training.

    TODO
    """
    raise NotImplementedError("TODO: dropout")


# --- Part C -----------------------------------------------------------------------------------------

def train_epoch(key, params, batches, rate, lr):
    """One epoch of sgd_step over `batches` (a list of (x, y)), a fresh key and a fresh keep mask
    for every step.  Returns (params, key, masks): the parameters after the epoch, the key for
    the next epoch, and the list of the steps' keep masks (bool[B, H] each).

    TODO
    """
    raise NotImplementedError("TODO: train_epoch")


# --- Part D -----------------------------------------------------------------------------------------

def per_example_noise(key, xs):
    """xs[i] + jax.random.normal(keys[i], xs[i].shape) for every example i, where
    keys = jax.random.split(key, B): with jax.vmap, not a Python loop.

    TODO
    """
    raise NotImplementedError("TODO: per_example_noise")


if __name__ == "__main__":
    # A small demo (not graded).
    key = jax.random.key(0)
    params = init_mlp(key, [3, 8, 1])
    print("init_mlp:", jax.tree.map(jnp.shape, params))
    x = jnp.ones((2, 8))
    print("dropout:", dropout(jax.random.key(1), x, 0.25, True))
    batches = [(jnp.ones((4, 3)), jnp.zeros((4, 1)))] * 3
    params, key, masks = train_epoch(jax.random.key(2), params, batches, 0.25, 0.1)
    print("train_epoch: returned key", key, "masks kept", [float(m.mean()) for m in masks])
    print("per_example_noise:", per_example_noise(jax.random.key(3), jnp.zeros((3, 2))))
