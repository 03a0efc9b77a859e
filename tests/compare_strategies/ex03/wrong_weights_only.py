# verdict: wrong
# strategy: biases left out
# breaks: "taken over *every* leaf together, as if all weights and biases were one flat vector"
# idea: norm over the 'w' leaves only
# should-fail: matches_one_at_a_time, no_loop_over_batch, one_compile_per_shape
"""Exercise 3 submission (wrong_weights_only), written from the statement alone."""

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
    grads = jax.vmap(jax.grad(example_loss), in_axes=(None, 0, 0))(params, xs, ys)
    ws = [l["w"] for l in grads["layers"]] + [grads["out"]["w"]]
    return jnp.sqrt(sum(jnp.sum(w ** 2, axis=(1, 2)) for w in ws))
