# verdict: right
# strategy: vmap of vjp, inner jit
# idea: per-example vjp pullback of the loss; a jitted helper inside the jitted function
"""Exercise 3 submission (right_vmap_vjp_inner_jit), written from the statement alone."""

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
def _sqnorm(tree):
    return sum(jnp.sum(l * l) for l in jax.tree.leaves(tree))


def _grad_via_vjp(params, x, y):
    _, pullback = jax.vjp(lambda p: example_loss(p, x, y), params)
    return pullback(jnp.float32(1.0))[0]


@jax.jit
def per_example_grad_norms(params, xs, ys):
    def one(x, y):
        return jnp.sqrt(_sqnorm(_grad_via_vjp(params, x, y)))
    return jax.vmap(one, in_axes=(0, 0))(xs, ys)
