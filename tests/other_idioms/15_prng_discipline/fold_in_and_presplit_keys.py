"""Exercise 15 in another idiom: fold_in for the layers, a uniform comparison for the mask, every step key split off up front."""

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

def init_mlp(key, sizes):
    layers = []
    for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        layer_key = jax.random.fold_in(key, i)  # derived from key; key itself never draws
        layers.append({"w": jax.random.normal(layer_key, (m, n), dtype=jnp.float32) * (1.0 / jnp.sqrt(jnp.float32(m))),
                       "b": jnp.zeros((n,), dtype=jnp.float32)})
    return layers


def dropout(key, x, rate, training):
    if not training:
        return x
    keep = jax.random.uniform(key, x.shape) < 1.0 - rate  # what bernoulli(key, 1 - rate) draws
    return jnp.where(keep, x / (1.0 - rate), jnp.zeros_like(x))


def train_epoch(key, params, batches, rate, lr):
    key, *step_keys = jax.random.split(key, len(batches) + 1)
    width = params[0]["w"].shape[1]
    masks = []
    for (x, y), step_key in zip(batches, step_keys):
        keep = jax.random.bernoulli(step_key, p=1.0 - rate, shape=(x.shape[0], width))
        params = sgd_step(params, x, y, keep, rate, lr)
        masks.append(keep)
    return params, key, masks


def per_example_noise(key, xs):
    def one(k, x):
        return x + jax.random.normal(k, shape=x.shape, dtype=x.dtype)

    return jax.vmap(one, in_axes=(0, 0))(jax.random.split(key, num=xs.shape[0]), xs)
