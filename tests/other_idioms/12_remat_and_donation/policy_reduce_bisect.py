"""jax.checkpoint with an explicit nothing_saveable policy over functools.reduce segments; bisection for the segment; jax.jit(step, donate_argnums=[0, 1]) with value_and_grad and a zipped tree_map."""

import functools

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
    _, vjp_fn = jax.vjp(f, *args)
    return jax.tree_util.tree_reduce(lambda acc, leaf: acc + int(leaf.nbytes), vjp_fn, 0)


# jax.checkpoint's default policy is nothing_saveable; naming it changes nothing
_remat = functools.partial(jax.checkpoint, policy=jax.checkpoint_policies.nothing_saveable)


def _segment(seg_params, h):
    return functools.reduce(lambda acc, p: block(p, acc), seg_params, h)


def _segments(params, segment):
    return [params[i:i + segment] for i in range(0, len(params), segment)]


def remat_loss(params, x, y, segment):
    h = functools.reduce(lambda acc, seg: _remat(_segment)(seg, acc), _segments(params, segment), x)
    err = h - y
    return 0.5 * jnp.mean(jnp.sum(err * err, axis=-1))


def choose_segment(params, x, y, budget):
    # fewer segments keep fewer bytes, and the number of segments never grows with the size:
    # bisect for the first size that fits (each probe is a measurement)
    def fits(k):
        return residual_bytes(lambda p, a, b: remat_loss(p, a, b, k), params, x, y) <= budget

    lo, hi = 1, len(params)
    if not fits(hi):
        raise ValueError("even one segment around all blocks keeps more than the budget")
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _step(params, momentum, x, y, lr, beta):
    value, grads = jax.value_and_grad(remat_loss)(params, x, y, SEGMENT)
    pairs = jax.tree_util.tree_map(lambda p, m, g: (p - lr * (beta * m + g), beta * m + g), params, momentum, grads)
    is_pair = lambda t: isinstance(t, tuple)  # noqa: E731
    new_params = jax.tree_util.tree_map(lambda t: t[0], pairs, is_leaf=is_pair)
    new_momentum = jax.tree_util.tree_map(lambda t: t[1], pairs, is_leaf=is_pair)
    return new_params, new_momentum, value


train_step = jax.jit(_step, donate_argnums=[0, 1])


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    depth, width, batch = 6, 32, 16
    params = [{"w": jnp.asarray(rng.normal(size=(width, width)) / np.sqrt(width), jnp.float32),
               "b": jnp.zeros(width, jnp.float32)} for _ in range(depth)]
    x = jnp.asarray(rng.normal(size=(batch, width)), jnp.float32)
    y = jnp.asarray(rng.normal(size=(batch, width)), jnp.float32)
    for k in range(1, depth + 1):
        print(f"segment {k} ", residual_bytes(lambda p, a, b: remat_loss(p, a, b, k), params, x, y), "bytes")
    print([choose_segment(params, x, y, b) for b in (39684, 39683, 33540, 33539, 31492, 31491, 29444)])
    momentum = jax.tree.map(jnp.zeros_like, params)
    for step in range(3):
        params, momentum, value = train_step(params, momentum, x, y, 0.05, 0.9)
        print(f"step {step}  loss {float(value):.4f}")
