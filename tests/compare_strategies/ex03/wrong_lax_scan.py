# verdict: wrong
# strategy: lax.scan over the batch
# breaks: "neither a Python loop nor a JAX loop (... `lax.scan` ...)"
# idea: scan with no carry
# should-fail: no_loop_over_batch
"""Exercise 3 submission (wrong_lax_scan), written from the statement alone."""

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
    def body(c, xy):
        g = jax.grad(example_loss)(params, *xy)
        return c, jnp.sqrt(sum(jnp.sum(l ** 2) for l in jax.tree.leaves(g)))
    return lax.scan(body, None, (xs, ys))[1]
