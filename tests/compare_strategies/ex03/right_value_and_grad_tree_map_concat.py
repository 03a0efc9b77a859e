# verdict: right
# strategy: vmap of value_and_grad + concatenate
# idea: value_and_grad vmapped; leaves reshaped to [B,-1] and concatenated
"""Exercise 3 submission (right_value_and_grad_tree_map_concat), written from the statement alone."""

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
    _, grads = jax.vmap(jax.value_and_grad(example_loss), in_axes=(None, 0, 0))(params, xs, ys)
    B = xs.shape[0]
    flat = jnp.concatenate([g.reshape(B, -1) for g in jax.tree.leaves(grads)], axis=1)
    return jnp.sqrt(jnp.einsum("bp,bp->b", flat, flat))
