# verdict: wrong
# strategy: python loop over examples
# breaks: "no loop over the examples, neither a Python loop nor a JAX loop"
# idea: grad once per example in a Python loop, stacked
# should-fail: no_loop_over_batch
"""Exercise 3 submission (wrong_python_loop), written from the statement alone."""

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
    out = []
    for i in range(xs.shape[0]):
        g = jax.grad(example_loss)(params, xs[i], ys[i])
        out.append(jnp.sqrt(sum(jnp.sum(l ** 2) for l in jax.tree.leaves(g))))
    return jnp.stack(out)
