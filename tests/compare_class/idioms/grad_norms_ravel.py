"""Per-example gradient norms, written another way: flatten each example's gradient."""

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree


def predict(params, x):
    h = x
    for layer in params["layers"]:
        h = jnp.tanh(h @ layer["w"] + layer["b"])
    return h @ params["out"]["w"] + params["out"]["b"]


def example_loss(params, x, y):
    return 0.5 * jnp.sum((predict(params, x) - y) ** 2)


def _flat_gradient(params, x, y):
    # The whole gradient pytree of one example as one vector.
    gradient = jax.grad(example_loss)(params, x, y)
    vector, _unravel = ravel_pytree(gradient)
    return vector


@jax.jit
def per_example_grad_norms(params, xs, ys):
    # One row per example: the flattened gradient; its norm is the answer.
    rows = jax.vmap(_flat_gradient, in_axes=(None, 0, 0))(params, xs, ys)
    return jnp.linalg.norm(rows, axis=1)
