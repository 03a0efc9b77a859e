# verdict: wrong
# strategy: replicated weights, in_axes=0
# breaks: "The parameters are shared by all examples, so they must *not* be mapped: `in_axes=(None, 0, 0)`"
# idea: broadcasts every parameter to [B, ...] and maps it
# should-fail: no_loop_over_batch
"""Exercise 3 submission (wrong_replicated_params), written from the statement alone."""

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
    B = xs.shape[0]
    stacked = jax.tree.map(lambda p: jnp.broadcast_to(p, (B,) + p.shape), params)
    grads = jax.vmap(jax.grad(example_loss))(stacked, xs, ys)
    return jnp.sqrt(sum(jnp.sum(g.reshape(B, -1) ** 2, axis=1) for g in jax.tree.leaves(grads)))
