# verdict: right
# strategy: vmap + ravel_pytree
# idea: flatten each example's gradient with ravel_pytree, jnp.linalg.norm
"""Exercise 3 submission (right_ravel_pytree_linalg_norm), written from the statement alone."""

import jax
import jax.numpy as jnp
from jax import lax


def predict(params, x):
    h = x
    for layer in params["layers"]:
        h = jnp.tanh(h @ layer["w"] + layer["b"])
    return h @ params["out"]["w"] + params["out"]["b"]


def example_loss(params, x, y):
    return 0.5 * jnp.sum((predict(params, x) - y) ** 2)

from jax.flatten_util import ravel_pytree


@jax.jit
def per_example_grad_norms(params, xs, ys):
    def flat_grad(x, y):
        return ravel_pytree(jax.grad(example_loss)(params, x, y))[0]

    flat = jax.vmap(flat_grad)(xs, ys)  # [B, P]; params closed over, not mapped
    return jnp.linalg.norm(flat, axis=1)
