"""Reference solution for exercise 12 (remat and donation)."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import print_saved_residuals

SEGMENT = 2  # the segment size train_step uses


def block(p, h):
    return jnp.tanh(h @ p["w"] + p["b"])


def loss(params, x, y):
    h = x
    for p in params:
        h = block(p, h)
    return 0.5 * jnp.mean(jnp.sum((h - y) ** 2, axis=-1))


def residual_bytes(f, *args):
    # What reverse mode keeps for the backward pass: the leaves of the VJP closure.
    _, f_vjp = jax.vjp(f, *args)
    return int(sum(int(leaf.nbytes) for leaf in jax.tree.leaves(f_vjp)))


def _run(ps, h):
    for p in ps:
        h = block(p, h)
    return h


def remat_loss(params, x, y, segment):
    # Each group of `segment` consecutive blocks runs under jax.checkpoint: only its input is
    # kept, everything inside is recomputed on the way back.  The last group may be shorter.
    h = x
    for start in range(0, len(params), segment):
        h = jax.checkpoint(_run)(params[start:start + segment], h)
    return 0.5 * jnp.mean(jnp.sum((h - y) ** 2, axis=-1))


def choose_segment(params, x, y, budget):
    # Measure, do not estimate: the smallest segment size whose residuals fit the budget.
    for segment in range(1, len(params) + 1):
        if residual_bytes(lambda p, xx, yy: remat_loss(p, xx, yy, segment), params, x, y) <= budget:
            return segment
    return len(params)


@partial(jax.jit, donate_argnums=(0, 1))
def train_step(params, momentum, x, y, lr, beta):
    value, grads = jax.value_and_grad(remat_loss)(params, x, y, SEGMENT)
    momentum = jax.tree.map(lambda m, g: beta * m + g, momentum, grads)
    params = jax.tree.map(lambda p, m: p - lr * m, params, momentum)
    return params, momentum, value


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    depth, width, batch = 8, 32, 16
    params = [{"w": jnp.asarray(rng.normal(size=(width, width)) / np.sqrt(width), jnp.float32),
               "b": jnp.zeros(width, jnp.float32)} for _ in range(depth)]
    x = jnp.asarray(rng.normal(size=(batch, width)), jnp.float32)
    y = jnp.asarray(rng.normal(size=(batch, width)), jnp.float32)
    print("no remat      ", residual_bytes(loss, params, x, y), "bytes")
    for k in range(1, depth + 1):
        print(f"segment {k}     ", residual_bytes(lambda p, a, b: remat_loss(p, a, b, k), params, x, y), "bytes")
    budget = residual_bytes(lambda p, a, b: remat_loss(p, a, b, 3), params, x, y) + 100
    print("budget", budget, "-> segment", choose_segment(params, x, y, budget))
    print_saved_residuals(lambda p: remat_loss(p, x, y, 4), params)
    momentum = jax.tree.map(jnp.zeros_like, params)
    for step in range(5):
        params, momentum, value = train_step(params, momentum, x, y, 0.05, 0.9)
        print(f"step {step}  loss {float(value):.4f}")
