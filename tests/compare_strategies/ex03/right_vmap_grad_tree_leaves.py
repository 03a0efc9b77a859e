# verdict: right
# strategy: vmap of grad + tree_leaves
# idea: vmap(grad, in_axes=(None,0,0)), then sum of squares over leaves, sqrt
"""Exercise 3 submission (right_vmap_grad_tree_leaves), written from the statement alone."""

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


@jax.jit
def per_example_grad_norms(params, xs, ys):
    grads = jax.vmap(jax.grad(example_loss), in_axes=(None, 0, 0))(params, xs, ys)
    sq = sum(jnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in jax.tree_util.tree_leaves(grads))
    return jnp.sqrt(sq)
