# verdict: wrong
# strategy: float16 result
# breaks: "per_example_grad_norms(params, xs, ys) -> f32[B]"
# idea: casts the norms to float16 to save memory
# should-fail: matches_one_at_a_time, no_loop_over_batch, one_compile_per_shape
"""Exercise 3 submission (wrong_float16_output), written from the statement alone."""

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
    sq = sum(jnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in jax.tree.leaves(grads))
    return jnp.sqrt(sq).astype(jnp.float16)
