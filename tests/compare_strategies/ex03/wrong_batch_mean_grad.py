# verdict: wrong
# strategy: gradient of the batch-mean loss
# breaks: "Entry `i` is the L2 norm of `grad(example_loss)(params, xs[i], ys[i])`"
# idea: norm of the averaged gradient, broadcast to every example
# should-fail: matches_one_at_a_time, no_loop_over_batch, one_compile_per_shape
"""Exercise 3 submission (wrong_batch_mean_grad), written from the statement alone."""

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
    mean_loss = lambda p: jnp.mean(jax.vmap(example_loss, in_axes=(None, 0, 0))(p, xs, ys))
    g = jax.grad(mean_loss)(params)
    n = jnp.sqrt(sum(jnp.sum(l ** 2) for l in jax.tree.leaves(g)))
    return jnp.full(xs.shape[0], n)
