"""Exercise 15 in another idiom: the epoch as one lax.scan over stacked batches, its step keys split off up front."""

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
    keys = jax.random.split(key, len(sizes) - 1)
    return [{"w": jax.random.normal(k, (m, n)) / jnp.sqrt(m), "b": jnp.zeros((n,), jnp.float32)}
            for k, m, n in zip(keys, sizes[:-1], sizes[1:])]


# --- Part B -----------------------------------------------------------------------------------------

def dropout(key, x, rate, training):
    if not training:
        return x
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0)


# --- Part C -----------------------------------------------------------------------------------------

def train_epoch(key, params, batches, rate, lr):
    """The whole epoch as one scan: every step key split off up front, the masks drawn inside."""
    hidden = params[0]["w"].shape[1]
    keys = jax.random.split(key, len(batches) + 1)
    key, step_keys = keys[0], keys[1:]
    xs = jnp.stack([x for x, _ in batches])
    ys = jnp.stack([y for _, y in batches])

    def step(p, inputs):
        x, y, step_key = inputs
        keep = jax.random.bernoulli(step_key, 1.0 - rate, (x.shape[0], hidden))
        return sgd_step(p, x, y, keep, rate, lr), keep

    params, masks = jax.lax.scan(step, params, (xs, ys, step_keys))
    return params, key, list(masks)


# --- Part D -----------------------------------------------------------------------------------------

def per_example_noise(key, xs):
    keys = jax.random.split(key, xs.shape[0])
    return jax.vmap(lambda k, x: x + jax.random.normal(k, x.shape))(keys, xs)


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
