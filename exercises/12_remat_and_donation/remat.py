"""Exercise 12: remat and donation.

Read README.md in this folder first.  Fill in every TODO; keep the names and signatures,
and keep `block` and `loss` unchanged.  Check your work with:  grade exercise 12
"""

from functools import partial  # noqa: F401 - handy for jax.jit with donate_argnums

import jax
import jax.numpy as jnp
import numpy as np  # noqa: F401

SEGMENT = 2  # the segment size train_step uses


def block(p, h):
    """One block of the deep MLP (do not change): p = {"w": f32[d, d], "b": f32[d]}, h: f32[B, d]."""
    return jnp.tanh(h @ p["w"] + p["b"])


def loss(params, x, y):
    """The plain loss, no remat (do not change): params is a list of blocks; x, y: f32[B, d]."""
    h = x
    for p in params:
        h = block(p, h)
    return 0.5 * jnp.mean(jnp.sum((h - y) ** 2, axis=-1))


def residual_bytes(f, *args):
    """How many bytes reverse mode keeps from the forward pass of f(*args) for the backward pass:
    the sum of nbytes over the leaves of the VJP function jax.vjp(f, *args) returns.  -> int

    TODO
    """
    raise NotImplementedError("TODO: residual_bytes")


def remat_loss(params, x, y, segment):
    """The same value as loss(params, x, y), with the blocks grouped into consecutive segments of
    `segment` blocks (a Python int >= 1; the last segment may be shorter), each segment under
    jax.checkpoint so that only its input is kept for the backward pass.  The head (the mean
    squared error) stays outside the segments.

    TODO
    """
    raise NotImplementedError("TODO: remat_loss")


def choose_segment(params, x, y, budget):
    """The smallest segment size (1..len(params)) for which
    residual_bytes(lambda p, a, b: remat_loss(p, a, b, segment), params, x, y) <= budget.  -> int

    TODO
    """
    raise NotImplementedError("TODO: choose_segment")


def train_step(params, momentum, x, y, lr, beta):
    """One step of SGD with momentum on remat_loss(..., SEGMENT) -> (new_params, new_momentum, loss):

        momentum = beta * momentum + grad;  params = params - lr * momentum   (leaf by leaf)

    loss is the value at the params passed in; lr and beta are Python floats that change from
    call to call.  TODO: make train_step the function jax.jit returns, donating params and
    momentum (and only them).
    """
    raise NotImplementedError("TODO: train_step")


if __name__ == "__main__":
    # A small demo (not graded): how the residual bytes fall as segments grow.
    rng = np.random.default_rng(0)
    depth, width, batch = 8, 32, 16
    params = [{"w": jnp.asarray(rng.normal(size=(width, width)) / np.sqrt(width), jnp.float32),
               "b": jnp.zeros(width, jnp.float32)} for _ in range(depth)]
    x = jnp.asarray(rng.normal(size=(batch, width)), jnp.float32)
    y = jnp.asarray(rng.normal(size=(batch, width)), jnp.float32)
    print("no remat  ", residual_bytes(loss, params, x, y), "bytes")
    for k in range(1, depth + 1):
        print(f"segment {k} ", residual_bytes(lambda p, a, b: remat_loss(p, a, b, k), params, x, y), "bytes")
    budget = residual_bytes(lambda p, a, b: remat_loss(p, a, b, 3), params, x, y) + 100
    print("budget", budget, "-> segment", choose_segment(params, x, y, budget))
    momentum = jax.tree.map(jnp.zeros_like, params)
    for step in range(5):
        params, momentum, value = train_step(params, momentum, x, y, 0.05, 0.9)
        print(f"step {step}  loss {float(value):.4f}")
