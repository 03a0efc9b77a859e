"""Exercise 12: remat and donation."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.ad_checkpoint import checkpoint_name

SEGMENT = 2


def block(p, h):
    return jnp.tanh(h @ p["w"] + p["b"])


def loss(params, x, y):
    h = x
    for p in params:
        h = block(p, h)
    return 0.5 * jnp.mean(jnp.sum((h - y) ** 2, axis=-1))


def _head(h, y):
    return 0.5 * jnp.mean(jnp.sum((h - y) ** 2, axis=-1))


def residual_bytes(f, *args):
    _, f_vjp = jax.vjp(f, *args)
    return int(sum(int(np.prod(l.shape)) * np.dtype(l.dtype).itemsize for l in jax.tree.leaves(f_vjp)))


@jax.jit
def _run_segment(ps, h):
    for p in ps:
        h = block(p, h)
    return h


def remat_loss(params, x, y, segment):
    h = x
    for i in range(0, len(params), segment):
        h = jax.checkpoint(_run_segment)(params[i:i + segment], h)
    return _head(h, y)


def choose_segment(params, x, y, budget):
    for k in range(1, len(params) + 1):
        if residual_bytes(lambda p, a, b: remat_loss(p, a, b, k), params, x, y) <= budget:
            return k
    return len(params)


@partial(jax.jit, donate_argnums=(0, 1))
def train_step(params, momentum, x, y, lr, beta):
    value, grads = jax.value_and_grad(remat_loss)(params, x, y, SEGMENT)
    new_m = jax.tree.map(lambda m, g: beta * m + g, momentum, grads)
    new_p = jax.tree.map(lambda p, m: p - lr * m, params, new_m)
    return new_p, new_m, value
