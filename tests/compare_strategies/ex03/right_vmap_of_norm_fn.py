# verdict: right
# strategy: vmap of a per-example norm function
# idea: one example: grad then norm; vmap that
"""Exercise 3 submission (right_vmap_of_norm_fn), written from the statement alone."""

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


def _one_norm(params, x, y):
    g = jax.grad(example_loss)(params, x, y)
    return jnp.sqrt(sum(jnp.vdot(l, l) for l in jax.tree.leaves(g)))


@jax.jit
def per_example_grad_norms(params, xs, ys):
    return jax.vmap(_one_norm, in_axes=(None, 0, 0))(params, xs, ys)
