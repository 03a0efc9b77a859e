# verdict: right
# strategy: vmap + optax.global_norm
# idea: optax.global_norm of each example's gradient pytree
"""Exercise 3 submission (right_optax_global_norm), written from the statement alone."""

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

import optax


@jax.jit
def per_example_grad_norms(params, xs, ys):
    per_ex = lambda x, y: optax.global_norm(jax.grad(example_loss)(params, x, y))
    return jax.vmap(per_ex)(xs, ys)
