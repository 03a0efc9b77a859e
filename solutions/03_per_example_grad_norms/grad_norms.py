"""Reference solution for exercise 3 (per-example gradient norms)."""

import jax
import jax.numpy as jnp


def predict(params, x):
    h = x
    for layer in params["layers"]:
        h = jnp.tanh(h @ layer["w"] + layer["b"])
    return h @ params["out"]["w"] + params["out"]["b"]


def example_loss(params, x, y):
    return 0.5 * jnp.sum((predict(params, x) - y) ** 2)


@jax.jit
def per_example_grad_norms(params, xs, ys):
    # Gradient of one example's loss, mapped over the batch axis of the data only.
    grads = jax.vmap(jax.grad(example_loss), in_axes=(None, 0, 0))(params, xs, ys)
    # Every leaf now has a leading batch axis: square-sum the rest of each leaf, add the
    # leaves up, and take the root once.
    squares = [jnp.sum(jnp.square(leaf), axis=tuple(range(1, leaf.ndim))) for leaf in jax.tree.leaves(grads)]
    return jnp.sqrt(sum(squares))
