"""Segments as jax.remat bodies of a lax.scan over stacked params (tail segment separate); measure-all-then-min search; jax.jit(..., donate_argnames=...) with jax.vjp and flattened leaves."""

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
    residuals = jax.tree_util.tree_leaves(jax.vjp(f, *args)[1])
    return int(sum(int(np.prod(r.shape)) * np.dtype(r.dtype).itemsize for r in residuals))


def _stack(blocks, lead=()):
    """A list of {"w", "b"} blocks -> one {"w", "b"} with the blocks along leading axes `lead`."""
    return jax.tree.map(lambda *leaves: jnp.stack(leaves).reshape(lead + leaves[0].shape), *blocks)


@jax.remat  # the default policy: keep only the segment's inputs
def _segment(stacked, h):
    """Run the blocks stacked along axis 0 of `stacked`, in order."""
    def one_block(h, p):
        return block(p, h), None

    h, _ = jax.lax.scan(one_block, h, stacked)
    return h


def remat_loss(params, x, y, segment):
    depth = len(params)
    n_full, rest = divmod(depth, segment)
    h = x
    if n_full:
        full = _stack(params[:n_full * segment], (n_full, segment))
        h, _ = jax.lax.scan(lambda h, seg_params: (_segment(seg_params, h), None), h, full)
    if rest:  # the shorter last segment
        h = _segment(_stack(params[n_full * segment:], (rest,)), h)
    return 0.5 * jnp.mean(jnp.sum((h - y) ** 2, axis=-1))


def choose_segment(params, x, y, budget):
    kept = {k: residual_bytes(lambda p, a, b, k=k: remat_loss(p, a, b, k), params, x, y)
            for k in range(1, len(params) + 1)}
    return min(k for k, nbytes in kept.items() if nbytes <= budget)


def _step(params, momentum, x, y, lr, beta):
    value, pullback = jax.vjp(lambda p: remat_loss(p, x, y, SEGMENT), params)
    (grads,) = pullback(jnp.ones_like(value))
    p_leaves, treedef = jax.tree_util.tree_flatten(params)
    m_leaves = treedef.flatten_up_to(momentum)
    g_leaves = treedef.flatten_up_to(grads)
    new_m = [beta * m + g for m, g in zip(m_leaves, g_leaves)]
    new_p = [p - lr * m for p, m in zip(p_leaves, new_m)]
    return treedef.unflatten(new_p), treedef.unflatten(new_m), value


train_step = jax.jit(_step, donate_argnames=("params", "momentum"))


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    depth, width, batch = 6, 32, 16
    params = [{"w": jnp.asarray(rng.normal(size=(width, width)) / np.sqrt(width), jnp.float32),
               "b": jnp.zeros(width, jnp.float32)} for _ in range(depth)]
    x = jnp.asarray(rng.normal(size=(batch, width)), jnp.float32)
    y = jnp.asarray(rng.normal(size=(batch, width)), jnp.float32)
    for k in range(1, depth + 1):
        print(f"segment {k} ", residual_bytes(lambda p, a, b: remat_loss(p, a, b, k), params, x, y), "bytes")
    print(choose_segment(params, x, y, 33540), choose_segment(params, x, y, 33539))
    print(train_step.lower(params, params, x, y, 0.1, 0.9).as_text().splitlines()[0][:300])
    momentum = jax.tree.map(jnp.zeros_like, params)
    for step in range(3):
        params, momentum, value = train_step(params, momentum, x, y, 0.05, 0.9)
        print(f"step {step}  loss {float(value):.4f}")
