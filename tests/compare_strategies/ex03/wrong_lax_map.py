# verdict: wrong
# strategy: lax.map over the batch
# breaks: "neither a Python loop nor a JAX loop (`lax.map`, ...)"
# idea: lax.map of the per-example norm
# should-fail: no_loop_over_batch
"""Exercise 3 submission (wrong_lax_map), written from the statement alone."""

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
    def one(xy):
        g = jax.grad(example_loss)(params, xy[0], xy[1])
        return jnp.sqrt(sum(jnp.sum(l ** 2) for l in jax.tree.leaves(g)))
    return lax.map(one, (xs, ys))
