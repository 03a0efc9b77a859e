# verdict: wrong
# strategy: edited example_loss
# breaks: "keep `predict` / `example_loss` unchanged"
# idea: drops the 0.5 of example_loss (norms double)
# should-fail: matches_one_at_a_time, no_loop_over_batch, one_compile_per_shape
"""Exercise 3 submission (wrong_example_loss_changed), written from the statement alone."""

import jax
import jax.numpy as jnp
from jax import lax


def predict(params, x):
    h = x
    for layer in params["layers"]:
        h = jnp.tanh(h @ layer["w"] + layer["b"])
    return h @ params["out"]["w"] + params["out"]["b"]


def example_loss(params, x, y):
    return jnp.sum((predict(params, x) - y) ** 2)  # dropped the 0.5


@jax.jit
def per_example_grad_norms(params, xs, ys):
    grads = jax.vmap(jax.grad(example_loss), in_axes=(None, 0, 0))(params, xs, ys)
    sq = sum(jnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in jax.tree_util.tree_leaves(grads))
    return jnp.sqrt(sq)
