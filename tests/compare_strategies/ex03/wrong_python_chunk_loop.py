# verdict: wrong
# strategy: python loop over chunks
# breaks: "no loop over the examples, neither a Python loop ..."
# idea: vmap over chunks of 4, Python loop over chunks
# should-fail: no_loop_over_batch
"""Exercise 3 submission (wrong_python_chunk_loop), written from the statement alone."""

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
    f = jax.vmap(jax.grad(example_loss), in_axes=(None, 0, 0))
    outs = []
    for s in range(0, xs.shape[0], 4):
        g = f(params, xs[s:s + 4], ys[s:s + 4])
        outs.append(jnp.sqrt(sum(jnp.sum(l.reshape(l.shape[0], -1) ** 2, axis=1) for l in jax.tree.leaves(g))))
    return jnp.concatenate(outs)
