# verdict: right
# strategy: vmap + linalg.norm ord=2 per leaf
# idea: per-example weight grads are rank-1 outer products, so the spectral norm equals the Frobenius norm
"""Exercise 3 submission (right_spectral_norm_rank1), written from the statement alone."""

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


def _one(params, x, y):
    g = jax.grad(example_loss)(params, x, y)
    return jnp.sqrt(sum(jnp.linalg.norm(l, 2) ** 2 for l in jax.tree.leaves(g)))


@jax.jit
def per_example_grad_norms(params, xs, ys):
    return jax.vmap(_one, in_axes=(None, 0, 0))(params, xs, ys)
