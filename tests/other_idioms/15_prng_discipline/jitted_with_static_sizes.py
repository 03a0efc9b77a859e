"""Exercise 15 in another idiom: every function jitted (sizes and the flags static), one jitted step that splits, draws and trains."""

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

from functools import partial  # noqa: E402


@partial(jax.jit, static_argnums=1)
def _init(key, sizes):
    keys = jax.random.split(key, len(sizes) - 1)
    return [{"w": jax.random.normal(keys[i], (m, n)) / jnp.sqrt(m), "b": jnp.zeros(n, jnp.float32)}
            for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:]))]


def init_mlp(key, sizes):
    return _init(key, tuple(int(s) for s in sizes))


@partial(jax.jit, static_argnames=("rate", "training"))
def _dropout(key, x, rate, training):
    if not training:
        return x
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0)


def dropout(key, x, rate, training):
    return _dropout(key, x, rate=float(rate), training=bool(training))


@jax.jit
def _step(key, params, x, y, rate, lr):
    carry, step_key = jax.random.split(key)
    keep = jax.random.bernoulli(step_key, 1.0 - rate, (x.shape[0], params[0]["w"].shape[1]))
    return carry, sgd_step(params, x, y, keep, rate, lr), keep


def train_epoch(key, params, batches, rate, lr):
    masks = []
    for x, y in batches:
        key, params, keep = _step(key, params, x, y, rate, lr)
        masks.append(keep)
    return params, key, masks


@jax.jit
def per_example_noise(key, xs):
    keys = jax.random.split(key, xs.shape[0])
    return jax.vmap(lambda k, x: x + jax.random.normal(k, x.shape))(keys, xs)
