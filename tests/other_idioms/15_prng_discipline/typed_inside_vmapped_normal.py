"""Exercise 15 in another idiom: keys made typed on entry (and handed back in the kind given), noise drawn for the batch by a vmapped normal."""

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


def _typed(key):
    """Work with typed keys inside; remember whether the caller gave a legacy uint32[2] key."""
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key, False
    return jax.random.wrap_key_data(key), True


def init_mlp(key, sizes):
    key, _ = _typed(key)
    shapes = list(zip(sizes[:-1], sizes[1:]))
    keys = jax.random.split(key, len(shapes))
    return [dict(w=jax.random.normal(k, shape) / np.sqrt(shape[0]).astype(np.float32),
                 b=jnp.zeros(shape[1], jnp.float32)) for k, shape in zip(keys, shapes)]


def dropout(key, x, rate, training):
    if training:
        key, _ = _typed(key)
        keep = jax.random.bernoulli(key, 1.0 - rate, jnp.shape(x))
        x = jnp.where(keep, x / (1.0 - rate), 0.0)
    return x


def train_epoch(key, params, batches, rate, lr):
    key, legacy = _typed(key)
    hidden = params[0]["w"].shape[1]
    masks = []
    for x, y in batches:
        keys = jax.random.split(key)
        key, step_key = keys[0], keys[1]
        masks.append(jax.random.bernoulli(step_key, 1.0 - rate, (x.shape[0], hidden)))
        params = sgd_step(params, x, y, masks[-1], rate, lr)
    return params, (jax.random.key_data(key) if legacy else key), masks


def per_example_noise(key, xs):
    key, _ = _typed(key)
    keys = jax.random.split(key, xs.shape[0])
    noise = jax.vmap(partial(jax.random.normal, shape=xs.shape[1:], dtype=xs.dtype))(keys)
    return xs + noise
