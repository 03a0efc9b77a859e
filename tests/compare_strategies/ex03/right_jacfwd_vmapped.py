# verdict: right
# strategy: vmap of jacfwd
# idea: forward-mode gradient per example (jacfwd of a scalar loss), vmapped
"""Exercise 3 submission (right_jacfwd_vmapped), written from the statement alone."""

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
    g = jax.vmap(jax.jacfwd(example_loss), in_axes=(None, 0, 0))(params, xs, ys)
    sq = jax.tree.map(lambda a: jnp.sum(a ** 2, axis=tuple(range(1, a.ndim))), g)
    return jnp.sqrt(sum(jax.tree.leaves(sq)))
