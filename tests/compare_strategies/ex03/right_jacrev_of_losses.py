# verdict: right
# strategy: jacrev of per-example losses
# idea: jacobian of the vector of per-example losses w.r.t. params: row i is example i's gradient
"""Exercise 3 submission (right_jacrev_of_losses), written from the statement alone."""

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
    losses = lambda p: jax.vmap(example_loss, in_axes=(None, 0, 0))(p, xs, ys)
    jac = jax.jacrev(losses)(params)  # every leaf gets a leading batch axis
    sq = jax.tree.map(lambda j: jnp.sum(j.reshape(j.shape[0], -1) ** 2, axis=1), jac)
    return jnp.sqrt(jax.tree_util.tree_reduce(jnp.add, sq))
