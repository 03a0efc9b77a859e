"""Python loop over segments, each a jax.checkpoint-wrapped closure; linear search for the segment; @partial(jax.jit, donate_argnums=(0, 1)) with jax.tree.map."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

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
    _, f_vjp = jax.vjp(f, *args)
    return int(sum(leaf.nbytes for leaf in jax.tree.leaves(f_vjp)))


def _run_blocks(seg_params, h):
    for p in seg_params:
        h = block(p, h)
    return h


def remat_loss(params, x, y, segment):
    h = x
    for start in range(0, len(params), segment):
        h = jax.checkpoint(_run_blocks)(params[start:start + segment], h)
    return 0.5 * jnp.mean(jnp.sum((h - y) ** 2, axis=-1))


def choose_segment(params, x, y, budget):
    for k in range(1, len(params) + 1):
        kept = residual_bytes(lambda p, a, b: remat_loss(p, a, b, k), params, x, y)
        if kept <= budget:
            return k
    raise ValueError(f"no segment size keeps at most {budget} bytes")


@partial(jax.jit, donate_argnums=(0, 1))
def train_step(params, momentum, x, y, lr, beta):
    value, grads = jax.value_and_grad(remat_loss)(params, x, y, SEGMENT)
    new_momentum = jax.tree.map(lambda m, g: beta * m + g, momentum, grads)
    new_params = jax.tree.map(lambda p, m: p - lr * m, params, new_momentum)
    return new_params, new_momentum, value


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    depth, width, batch = 6, 32, 16
    params = [{"w": jnp.asarray(rng.normal(size=(width, width)) / np.sqrt(width), jnp.float32),
               "b": jnp.zeros(width, jnp.float32)} for _ in range(depth)]
    x = jnp.asarray(rng.normal(size=(batch, width)), jnp.float32)
    y = jnp.asarray(rng.normal(size=(batch, width)), jnp.float32)
    print("no remat  ", residual_bytes(loss, params, x, y), "bytes")
    for k in range(1, depth + 1):
        print(f"segment {k} ", residual_bytes(lambda p, a, b: remat_loss(p, a, b, k), params, x, y), "bytes")
    momentum = jax.tree.map(jnp.zeros_like, params)
    for step in range(3):
        params, momentum, value = train_step(params, momentum, x, y, 0.05, 0.9)
        print(f"step {step}  loss {float(value):.4f}")
