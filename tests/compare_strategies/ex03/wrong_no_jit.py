# verdict: wrong
# strategy: jit removed
# breaks: "Keep `@jax.jit` on the function"
# idea: the decorator dropped: eager vmap
# should-fail: one_compile_per_shape
"""Exercise 3 submission (wrong_no_jit), written from the statement alone."""

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


def per_example_grad_norms(params, xs, ys):
    grads = jax.vmap(jax.grad(example_loss), in_axes=(None, 0, 0))(params, xs, ys)
    return jnp.sqrt(sum(jnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in jax.tree.leaves(grads)))
