# verdict: wrong
# strategy: fori_loop + .at[].set
# breaks: "neither a Python loop nor a JAX loop (... `lax.fori_loop` ...)"
# idea: fori_loop filling an output buffer
# should-fail: no_loop_over_batch
"""Exercise 3 submission (wrong_fori_loop_at_set), written from the statement alone."""

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
    def body(i, acc):
        g = jax.grad(example_loss)(params, xs[i], ys[i])
        return acc.at[i].set(jnp.sqrt(sum(jnp.sum(l ** 2) for l in jax.tree.leaves(g))))
    return lax.fori_loop(0, xs.shape[0], body, jnp.zeros(xs.shape[0], jnp.float32))
