# verdict: wrong
# strategy: hard-coded one layer
# breaks: "the number of layers and their widths vary"
# idea: only layers[0] and out are summed
# should-fail: matches_one_at_a_time, no_loop_over_batch, one_compile_per_shape
"""Exercise 3 submission (wrong_one_hidden_layer_hardcoded), written from the statement alone."""

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
    g = jax.vmap(jax.grad(example_loss), in_axes=(None, 0, 0))(params, xs, ys)
    parts = [g["layers"][0]["w"], g["layers"][0]["b"], g["out"]["w"], g["out"]["b"]]
    return jnp.sqrt(sum(jnp.sum(p.reshape(p.shape[0], -1) ** 2, axis=1) for p in parts))
